package controllers

import (
	"context"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/contract"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/readiness"
)

const (
	errGetXR          = "cannot get composite resource"
	errGetComposed    = "cannot get composed resource"
	errDeleteComposed = "cannot delete composed resource"
	errWatchComposed  = "cannot watch composed resources"
	errResolveCreds   = "cannot resolve credentials"
	errWriteOwner     = "cannot write the verdict on the CAPI owner"
)

const (
	// actionReconcile is the action of the events the bridge records on XRs.
	actionReconcile = "Reconcile"
	// conflictRequeue is how soon an XR whose write met a newer object is
	// read again.
	conflictRequeue = 100 * time.Millisecond
	// reconcileTimeout bounds one reconcile of one XR, its writes included.
	reconcileTimeout = time.Minute
)

// seam is what differs between the InfraCluster and InfraMachine contracts;
// everything else about an adapted XR (finalizer, pause, credentials,
// deletion, the one deferred write) is the xrReconciler's.
type seam interface {
	// owner returns the CAPI object that owns the XR (a Cluster or a
	// Machine) and its Cluster; a nil owner while CAPI has not set the
	// owner reference or the owner is gone.
	owner(ctx context.Context, xr *composite.Unstructured) (client.Object, *clusterv1.Cluster, error)
	// pauseUnowned says whether an XR that has no CAPI owner yet must be
	// paused; nil leaves the annotation as it is.
	pauseUnowned(xr *composite.Unstructured) *bool
	// prepare readies a not paused, not deleting XR for composition: it
	// returns a verdict to hold the XR paused with, or nil to go on. It may
	// inject spec fields into s.xr.
	prepare(ctx context.Context, s *scope) (*contract.Verdict, error)
	// outputs maps the composition's outputs: their field errors, and the
	// spec fields to set once the XR satisfies its contract, with an event
	// message for the first time it does (none when empty).
	outputs(xr *unstructured.Unstructured) (set func(*unstructured.Unstructured), provisioned string, errs field.ErrorList)
	// waitBeforeDelete names what must be gone before the XR's own
	// composed resources go; nil when nothing.
	waitBeforeDelete(ctx context.Context, xr *composite.Unstructured) (*contract.Verdict, error)
	// watches are the CAPI objects whose changes concern XRs of the kind.
	watches(k *kindControllers, gvk schema.GroupVersionKind, xr *unstructured.Unstructured) []watch
}

// xrReconciler makes the XRs of one kind CAPI infrastructure objects, of the
// contract its seam implements.
type xrReconciler struct {
	client      client.Client
	gvk         schema.GroupVersionKind
	contract    seam
	recorder    events.EventRecorder
	tracker     *external.ObjectTracker
	credentials credentials.Resolver
	// written keeps a stale cache from sending a write twice.
	written written
	// mirrors are the bridge's own copies of outputs into XRs' specs.
	mirrors mirrors
	// newest are the newest Ready and Synced read of each XR.
	newest newest
	// crdLabels labels the CRDs of composed kinds once.
	crdLabels *crdLabels
	// access says which kinds the bridge may read.
	access *readAccess
	// released remembers, per XR, the selector it released a Composition
	// for, so that a read from a cache behind that write releases it (and
	// says so) only once.
	released sync.Map
}

// scope is one reconcile's working state. Phases change xr (metadata and
// spec) and say what to write; write sends it all once, at the end.
type scope struct {
	// xr is the working copy; before is what was read.
	xr     *composite.Unstructured
	before *unstructured.Unstructured
	// owner is the CAPI Cluster or Machine; nil when none.
	owner   client.Object
	cluster *clusterv1.Cluster
	// verdict goes to the owner's CrossplaneInfrastructureReady condition
	// and, when it changes, to an event on the XR; nil leaves it.
	verdict *contract.Verdict
	// status holds the contract status fields to apply; nil applies none.
	status *statusApply
	// events are recorded on the XR once the writes succeed.
	events []xrEvent
	// mirror is what was read with only the outputs copied into its spec,
	// and observed the generation Crossplane had observed Ready and Synced:
	// when the spec patch changes nothing else, its new generation is the
	// bridge's own mirror (readiness.Mirror). Nil when no outputs were copied.
	mirror   *unstructured.Unstructured
	observed int64
}

type xrEvent struct{ kind, reason, message string }

func (s *scope) event(kind, reason, message string) {
	s.events = append(s.events, xrEvent{kind, reason, message})
}

// hold pauses the working copy for its credentials, marked so that the
// bridge knows to lift this hold, and only this one, once they may be used.
func (s *scope) hold() {
	meta.AddAnnotations(s.xr, map[string]string{infrav1.CrossplanePausedAnnotation: annotationTrue, infrav1.CredentialsHoldAnnotation: annotationTrue})
}

// heldForCredentials says whether the XR was read held for its credentials.
func (s *scope) heldForCredentials() bool {
	return s.before.GetAnnotations()[infrav1.CredentialsHoldAnnotation] == annotationTrue
}

// pause sets or removes crossplane.io/paused on the working copy; either
// ends a hold for credentials.
func (s *scope) pause(paused bool) {
	meta.RemoveAnnotations(s.xr, infrav1.CredentialsHoldAnnotation)
	if paused {
		meta.AddAnnotations(s.xr, map[string]string{meta.AnnotationKeyReconciliationPaused: "true"})
		return
	}
	meta.RemoveAnnotations(s.xr, meta.AnnotationKeyReconciliationPaused)
}

// Reconcile maps one XR onto its contract, in CAPI's order: get, owner,
// finalizer, pause, then delete or normal, with one deferred write.
func (r *xrReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, reterr error) {
	// Every reconcile is bounded: nothing a tenant writes may hold a worker
	// that every tenant's XRs of the kind share.
	ctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
	defer cancel()
	xr := composite.New(composite.WithGroupVersionKind(r.gvk))
	if err := r.client.Get(ctx, req.NamespacedName, &xr.Unstructured); err != nil {
		return ctrl.Result{}, errors.Wrap(client.IgnoreNotFound(err), errGetXR)
	}
	log := ctrl.LoggerFrom(ctx).WithValues(r.gvk.Kind, klog.KObj(xr))
	ctx = ctrl.LoggerInto(ctx, log)

	s := &scope{xr: xr, before: xr.Unstructured.DeepCopy()}
	defer func() {
		if err := r.write(ctx, s); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
		// A conflict means someone wrote first (Crossplane, CAPI): read
		// again, quietly.
		if reterr != nil && conflicted(reterr) {
			log.V(4).Info("Conflict; requeueing", "error", reterr.Error())
			result, reterr = ctrl.Result{RequeueAfter: conflictRequeue}, nil
		}
	}()

	// Externally managed infrastructure's contract fields are another
	// system's to write; the bridge lets go of an XR it held before the
	// annotation was added. Its credentials stay the bridge's to check:
	// Crossplane composes it all the same.
	if annotations.IsExternallyManaged(xr) {
		log.V(4).Info("Composite resource is externally managed: checking its credentials only")
		controllerutil.RemoveFinalizer(xr, infrav1.Finalizer)
		if !xr.GetDeletionTimestamp().IsZero() {
			// Crossplane checks the pause before it handles a deletion.
			s.pause(false)
			return ctrl.Result{}, nil
		}
		return r.holdUnlessGranted(ctx, s, ptr.To(annotations.HasPaused(xr)))
	}

	var err error
	if s.owner, s.cluster, err = r.contract.owner(ctx, xr); err != nil {
		return ctrl.Result{}, err
	}
	if s.owner != nil {
		ctx = ctrl.LoggerInto(ctx, log.WithValues(s.owner.GetObjectKind().GroupVersionKind().Kind, klog.KObj(s.owner)))
	}
	paused := annotations.HasPaused(xr) || s.cluster != nil && annotations.IsPaused(s.cluster, xr)

	switch {
	case !xr.GetDeletionTimestamp().IsZero() && paused:
		// clusterctl move pauses a cluster and then deletes the source
		// objects, whose composed resources belong to the target by then:
		// leave them, and keep Crossplane off them too.
		s.pause(true)
		return ctrl.Result{}, nil
	case !xr.GetDeletionTimestamp().IsZero():
		return r.reconcileDelete(ctx, s)
	case s.owner == nil:
		return r.reconcileUnowned(ctx, s)
	}

	// The finalizer guards what Crossplane composed: an XR that composed
	// something gets it now, one still held paused (the machine gate,
	// credentials) gets it with the patch that unpauses it, so a gated
	// machine costs no write of its own for it.
	if len(xr.GetResourceReferences()) > 0 {
		controllerutil.AddFinalizer(xr, infrav1.Finalizer)
	}
	if paused {
		// CAPI pauses: carry it to Crossplane. The owner's verdict and the
		// provisioned milestone stay as they are. clusterctl move pauses
		// first: ready the XR for it. Credentials revoked meanwhile still
		// stop what it composed.
		s.pause(true)
		denied, _, err := r.checkCredentials(ctx, s.xr)
		if err != nil {
			return ctrl.Result{}, err
		}
		if denied != nil {
			return ctrl.Result{}, r.holdComposed(ctx, s, true)
		}
		return ctrl.Result{}, r.guardForMove(ctx, s)
	}
	return r.reconcileNormal(ctx, s)
}

// conflicted reports whether err is a conflict, or aggregates (as the
// deferred write's error does) only conflicts.
func conflicted(err error) bool {
	var agg kerrors.Aggregate
	if errors.As(err, &agg) {
		for _, e := range agg.Errors() {
			if !conflicted(e) {
				return false
			}
		}
		return len(agg.Errors()) > 0
	}
	return apierrors.IsConflict(errors.Cause(err))
}

// reconcileUnowned handles an XR whose CAPI owner reference is not set yet.
// Crossplane composes it all the same, so its credentials are checked all
// the same.
func (r *xrReconciler) reconcileUnowned(ctx context.Context, s *scope) (ctrl.Result, error) {
	ctrl.LoggerFrom(ctx).V(4).Info("Waiting for CAPI to set the owner reference")
	return r.holdUnlessGranted(ctx, s, r.contract.pauseUnowned(s.xr))
}

// holdUnlessGranted holds an XR that no CAPI object the bridge reconciles
// it for speaks for (one without its owner yet, one externally managed):
// while its credentials may not be used it stays paused, what it composed
// too, and an event says why; once they may, what it composed resumes and
// the XR's pause is set to want (nil leaves it as it is).
func (r *xrReconciler) holdUnlessGranted(ctx context.Context, s *scope, want *bool) (ctrl.Result, error) {
	v, result, err := r.checkCredentials(ctx, s.xr)
	if err != nil {
		return ctrl.Result{}, err
	}
	if v != nil {
		s.hold()
		s.event(eventType(v.Reason), v.Reason, v.Message)
		return result, r.holdComposed(ctx, s, true)
	}
	if meta.IsPaused(s.before) {
		if err := r.holdComposed(ctx, s, false); err != nil {
			return ctrl.Result{}, err
		}
	}
	if want == nil && s.heldForCredentials() {
		// The hold was the bridge's: lift it.
		want = ptr.To(false)
	}
	if want != nil {
		s.pause(*want)
	}
	return ctrl.Result{}, nil
}

// reconcileNormal opens the way to composition (the seam's gate, then the
// credentials), maps the outputs, and records the verdict and the
// provisioned milestone.
func (r *xrReconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	hold, err := r.contract.prepare(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	if hold != nil {
		s.pause(true)
		s.verdict = hold
		// A grant changes no object the bridge watches: look again.
		if hold.Reason == infrav1.ForbiddenReason {
			return ctrl.Result{RequeueAfter: recheckAccessAfter}, nil
		}
		return ctrl.Result{}, nil
	}
	// The credentials the XR composes with, after the seam injected any
	// (a machine inherits its cluster's).
	denied, result, err := r.checkCredentials(ctx, s.xr)
	if err != nil {
		return ctrl.Result{}, err
	}
	if denied != nil {
		s.hold()
		s.verdict = denied
		return result, r.holdComposed(ctx, s, true)
	}
	// Guards a pause or a move left, and a hold for credentials, go before
	// the XR is Crossplane's again; while they cannot, it stays as it was.
	if err := r.unguard(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if meta.IsPaused(s.before) {
		if err := r.holdComposed(ctx, s, false); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.reselect(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	s.pause(false)
	controllerutil.AddFinalizer(s.xr, infrav1.Finalizer)

	u := &s.xr.Unstructured
	set, provisioned, errs := r.contract.outputs(u)
	// The newest Ready and Synced read, not one Crossplane put back from a
	// stale read (readiness.Replaced).
	c := r.newest.read(u)
	v := contract.Evaluate(readiness.ObserveConditions(u.GetGeneration(), false, c.synced, c.ready, r.mirrors.get(s.xr.GetUID())), errs)
	if v.Ready {
		set(u)
		s.mirror = s.before.DeepCopy()
		set(s.mirror)
		s.observed = min(c.ready.ObservedGeneration, c.synced.ObservedGeneration)
	}
	s.verdict = &v
	// A cache behind the bridge's own write of the milestone still shows
	// the XR not provisioned: it is, and is neither written nor announced
	// again.
	stale := !isProvisioned(u) && r.written.already(s.xr, partProvisioned, "true")
	was := isProvisioned(u) || stale
	now := contract.Provisioned(was, v)
	r.blockMove(ctx, s, now)
	if now && !stale {
		// Both fields, always: a server-side apply that leaves one out
		// releases it. Nothing is written before provisioning: absent is
		// not provisioned, and provisioned never goes back to false.
		s.status = &statusApply{fields: map[string]any{
			"status.initialization.provisioned": true,
			"status.ready":                      true,
		}}
	}
	if now && !was && provisioned != "" {
		s.event(corev1.EventTypeNormal, "Provisioned", provisioned)
	}
	return result, nil
}

// reconcileDelete deletes every resource the XR composed (and controls) and
// holds the XR until they are gone: Crossplane v2 leaves them to the garbage
// collector, which would only act once the XR is gone. The seam may name
// what must go first. The XR is released to Crossplane, which checks its
// pause before it handles a deletion, so that its finalizer goes too.
func (r *xrReconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	s.pause(false)
	if !controllerutil.ContainsFinalizer(s.xr, infrav1.Finalizer) {
		return ctrl.Result{}, nil
	}
	wait, err := r.contract.waitBeforeDelete(ctx, s.xr)
	if err != nil {
		return ctrl.Result{}, err
	}
	if wait != nil {
		s.verdict = wait
		return ctrl.Result{}, nil
	}
	// What the XR composed is deleted by its provider, with the XR's
	// credentials: where the namespace may no longer use them, it stays
	// held, and a new grant lets the deletion go on.
	denied, result, err := r.checkCredentials(ctx, s.xr)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.holdComposed(ctx, s, denied != nil); err != nil {
		return ctrl.Result{}, err
	}
	remaining, foreign, err := r.deleteComposed(ctx, s.xr)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(foreign) > 0 {
		v := contract.NotReady(infrav1.NotControlledReason,
			"Not deleting %s: spec.crossplane.resourceRefs names them but this composite resource does not control them", contract.List(foreign))
		s.event(corev1.EventTypeWarning, v.Reason, v.Message)
		s.verdict = &v
	}
	if len(remaining) > 0 {
		msg := contract.Waiting("composed resources", remaining)
		if denied != nil {
			msg += ", which stay paused until a grant lets the provider delete them with the XR's credentials: " + denied.Message
		}
		s.verdict = &contract.Verdict{Reason: infrav1.DeletingReason, Message: msg}
		return result, nil
	}
	ctrl.LoggerFrom(ctx).Info("Every composed resource is gone; releasing the composite resource")
	controllerutil.RemoveFinalizer(s.xr, infrav1.Finalizer)
	if s.owner != nil {
		r.written.forget(s.owner.GetUID())
	}
	r.written.forget(s.xr.GetUID())
	r.mirrors.forget(s.xr.GetUID())
	r.newest.forget(s.xr.GetUID())
	return ctrl.Result{}, nil
}

// deleteComposed deletes the composed resources this XR controls and returns
// those that still exist, and the referenced ones it does not control. It
// watches their kinds (metadata only) so that their disappearance wakes the
// bridge; nothing polls. A move guard left on one goes first: this is a
// deletion, not a move, and the provider must delete what it manages.
func (r *xrReconciler) deleteComposed(ctx context.Context, xr *composite.Unstructured) (remaining, foreign []string, err error) {
	controlled, foreign, err := r.composedControlled(ctx, xr)
	if err != nil {
		return nil, nil, err
	}
	for _, obj := range controlled {
		remaining = append(remaining, obj.Kind+"/"+obj.GetName())
		if err := r.setGuard(ctx, obj, false); err != nil {
			return nil, nil, err
		}
		if obj.GetDeletionTimestamp().IsZero() {
			ctrl.LoggerFrom(ctx).Info("Deleting composed resource", "kind", obj.Kind, "name", obj.GetName())
			if err := client.IgnoreNotFound(r.client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))); err != nil {
				return nil, nil, errors.Wrapf(err, "%s %s %s", errDeleteComposed, obj.Kind, obj.GetName())
			}
		}
	}
	sort.Strings(remaining)
	return remaining, foreign, nil
}

// write sends what the reconcile decided, each part only when it differs
// from what is stored: one merge patch of the XR's metadata and spec, one
// server-side apply of its contract status fields, one of the owner's
// condition; then the events.
func (r *xrReconciler) write(ctx context.Context, s *scope) error {
	var errs []error
	gen := s.before.GetGeneration()
	mirrorOnly := s.mirror != nil && equality.Semantic.DeepEqual(s.mirror.Object["spec"], s.xr.Object["spec"])
	// The working copy is what is wanted: no copy of it to mutate.
	if err := patchTo(ctx, r.client, &r.written, s.before, &unstructured.Unstructured{Object: s.xr.Object}); err != nil {
		// Nothing else is written on a stale read.
		return err
	}
	if mirrorOnly && s.before.GetGeneration() != gen && s.observed != 0 {
		r.mirrors.record(s.xr.GetUID(), readiness.Mirror{From: s.observed, To: s.before.GetGeneration()})
	}
	if s.status != nil {
		made, err := s.status.apply(ctx, r.client, &s.xr.Unstructured)
		if err == nil && made != "" {
			r.written.record(s.before, made, partProvisioned, "true")
		}
		errs = append(errs, err)
	}
	if s.verdict != nil && s.owner != nil {
		errs = append(errs, r.writeVerdict(ctx, s))
	}
	for _, e := range s.events {
		r.recorder.Eventf(s.xr, nil, e.kind, e.reason, actionReconcile, "%s", e.message)
	}
	return kerrors.NewAggregate(errs)
}

// writeVerdict applies the verdict as the owner's
// CrossplaneInfrastructureReady condition when it says something new, and
// records the change as an event on the XR.
func (r *xrReconciler) writeVerdict(ctx context.Context, s *scope) error {
	old, found := ownerCondition(s.owner)
	if found && s.verdict.Same(&old) {
		// The verdict is about the XR: a new generation of the owner (CAPI
		// copying providerID or the bootstrap data secret name into its
		// spec) that leaves it as it was is not written again.
		return nil
	}
	if !found && s.verdict.Shown() {
		// CAPI's own conditions say it already; the condition appears with
		// the first verdict they do not, and follows every verdict after.
		return nil
	}
	c := s.verdict.Condition(s.owner.GetGeneration())
	if r.written.already(s.owner, partVerdict, verdictValue(c)) {
		// The cache has not caught up with this very write yet: it was
		// sent, and its event recorded, already.
		return nil
	}
	// Converted only to be written: most reconciles write no verdict.
	owner, err := toUnstructured(r.client, s.owner)
	if err != nil {
		return errors.Wrap(err, errWriteOwner)
	}
	st := &statusApply{}
	st.condition(owner, c)
	made, err := st.apply(ctx, r.client, owner)
	if err != nil {
		return errors.Wrap(err, errWriteOwner)
	}
	// Only a verdict someone must act on becomes an event too; progress is
	// the condition's to say (and Provisioned, once, the XR's).
	if (!found || !s.verdict.Same(&old)) && eventType(s.verdict.Reason) == corev1.EventTypeWarning {
		r.recorder.Eventf(s.xr, nil, corev1.EventTypeWarning, s.verdict.Reason, actionReconcile, "%s", s.verdict.Message)
	}
	r.written.record(s.owner, made, partVerdict, verdictValue(c))
	return nil
}

// ownerCondition is the bridge's condition on a CAPI owner, read from the
// typed object.
func ownerCondition(owner client.Object) (metav1.Condition, bool) {
	g, ok := owner.(conditions.Getter)
	if !ok {
		return metav1.Condition{}, false
	}
	c := conditions.Get(g, infrav1.CrossplaneInfrastructureReadyCondition)
	if c == nil {
		return metav1.Condition{}, false
	}
	return *c, true
}

// eventType is Warning for verdicts that need someone to act, Normal for
// progress.
func eventType(reason string) string {
	switch reason {
	case infrav1.CompositionFailedReason, infrav1.InvalidOutputsReason, infrav1.InvalidFailureDomainReason,
		infrav1.InvalidBootstrapDataRefReason, infrav1.NotControlledReason, infrav1.ProviderConfigNotFoundReason,
		infrav1.ProviderConfigNotGrantedReason, infrav1.CredentialsSecretNotFoundReason, infrav1.SecretOutsideNamespaceReason:
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}

// checkCredentials resolves the credentials an XR composes with; a verdict
// to hold it paused with when they may not be used. It watches the
// referenced config's kind so that its creation or change wakes the XR. A
// missing Secret is looked for again after a while: the bridge does not
// watch Secrets.
func (r *xrReconciler) checkCredentials(ctx context.Context, xr *composite.Unstructured) (*contract.Verdict, ctrl.Result, error) {
	ref := providerConfigRef(&xr.Unstructured)
	if ref != nil {
		if err := r.watchConfig(ctx, ref); err != nil {
			return nil, ctrl.Result{}, err
		}
	}
	res, err := r.credentials.Resolve(ctx, xr.GetNamespace(), ref)
	if err != nil {
		return nil, ctrl.Result{}, errors.Wrap(err, errResolveCreds)
	}
	if res.Ready {
		return nil, ctrl.Result{}, nil
	}
	var result ctrl.Result
	if res.Reason == infrav1.CredentialsSecretNotFoundReason {
		result.RequeueAfter = credentials.RecheckSecretAfter
	}
	return &contract.Verdict{Reason: res.Reason, Message: res.Message}, result, nil
}

// watchConfig watches (metadata only) the kind of a referenced credentials
// config, mapping each config to the XRs of this kind that name it.
func (r *xrReconciler) watchConfig(ctx context.Context, ref *infrav1.ProviderConfigReference) error {
	m, err := r.client.RESTMapper().RESTMapping(schema.GroupKind{Group: ref.APIGroup, Kind: string(ref.Kind)})
	if err != nil {
		// The resolver reports a kind the API does not serve; nothing to
		// watch yet.
		return nil //nolint:nilerr // reported by the resolver as a verdict.
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(m.GroupVersionKind)
	kind := ref.Kind
	// A config's creation, deletion and spec (its secret) concern the XRs
	// that name it; its status does not. A provider updates a config's
	// status (its users) as managed resources start and stop using it:
	// every XR of a fleet sharing one config would be woken by every other.
	return errors.Wrap(r.tracker.Watch(ctrl.LoggerFrom(ctx), obj, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return referencing(ctx, r.client, r.gvk, o.GetNamespace(), func(ref *infrav1.ProviderConfigReference) bool {
			return ref.APIGroup == m.GroupVersionKind.Group && ref.Kind == kind && ref.Name == o.GetName()
		})
	}), predicate.GenerationChangedPredicate{}), "cannot watch credentials configs")
}

// providerConfigRef reads an XR's spec.providerConfigRef; nil when unset.
func providerConfigRef(u *unstructured.Unstructured) *infrav1.ProviderConfigReference {
	m, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "providerConfigRef")
	fields, _ := m.(map[string]any)
	if !ok || fields == nil {
		return nil
	}
	ref := &infrav1.ProviderConfigReference{}
	ref.APIGroup, _ = fields["apiGroup"].(string)
	kind, _ := fields["kind"].(string)
	ref.Kind = infrav1.ProviderConfigKind(kind)
	ref.Name, _ = fields["name"].(string)
	if ref.Name == "" {
		return nil
	}
	return ref
}

// referencing lists the XRs of a kind, in a namespace or all, whose
// providerConfigRef matches.
func referencing(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, namespace string, match func(*infrav1.ProviderConfigReference) bool) []reconcile.Request {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if ref := providerConfigRef(&list.Items[i]); ref != nil && match(ref) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

func isProvisioned(u *unstructured.Unstructured) bool {
	p, _, _ := unstructured.NestedBool(u.Object, "status", "initialization", "provisioned")
	return p
}

// xrChanged passes the XR updates that change something the bridge reads:
// its spec, the metadata it reads or writes (its labels, annotations and
// finalizer, owner references, deletion), its status but for the
// conditions, and what Crossplane's Ready and Synced tell the bridge
// (readiness.Observe, given the XR's mirror, and whether Crossplane
// acknowledged a pause). Crossplane updates an XR some 30 times while
// composing it; updates that only move Responsive, a transition time, a
// managed field, put back a condition Crossplane had replaced
// (readiness.Replaced), or write Crossplane's own metadata and Composition
// references (crossplaneOwn) wake no one, and neither does the bridge's own
// write when nothing else came between (written.echo). While the XR is
// being deleted every change wakes it.
func (r *xrReconciler) xrChanged(e event.UpdateEvent) bool {
	o, ok := e.ObjectOld.(*unstructured.Unstructured)
	n, ok2 := e.ObjectNew.(*unstructured.Unstructured)
	if !ok || !ok2 {
		return true
	}
	// The old object was read as the new one of the event before; read
	// again, it seeds what a restarted bridge remembers.
	before, now := r.newest.read(o), r.newest.read(n)
	if !equality.Semantic.DeepEqual(o.GetDeletionTimestamp(), n.GetDeletionTimestamp()) {
		return true
	}
	deleting := n.GetDeletionTimestamp() != nil
	if !deleting && r.written.echo(n.GetUID(), o.GetResourceVersion(), n.GetResourceVersion()) {
		// The reconcile that wrote it knew it.
		return false
	}
	own := r.crossplaneOwn()
	if deleting {
		own = crossplaneOwnNothing
	}
	if !equality.Semantic.DeepEqual(own.metadata(o), own.metadata(n)) {
		return true
	}
	a, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec")
	b, _, _ := unstructured.NestedFieldNoCopy(n.Object, "spec")
	if !equality.Semantic.DeepEqual(own.spec(a), own.spec(b)) {
		return true
	}
	// A new generation made only by Crossplane's own references is not one
	// the bridge waits for Crossplane to observe.
	gen := n.GetGeneration()
	if own.compositionRefs {
		gen = o.GetGeneration()
	} else if gen != o.GetGeneration() {
		return true
	}
	m := r.mirrors.get(n.GetUID())
	return !equality.Semantic.DeepEqual(statusRead(o, o.GetGeneration(), before, m), statusRead(n, gen, now, m))
}

// crossplaneOwn is what of an XR's metadata and spec is Crossplane's alone,
// written by Crossplane and read by no one else the bridge answers to.
type crossplaneOwn struct {
	// keys: labels and annotations under crossplane.io/ (the composite
	// label), but crossplane.io/paused, which the bridge sets; and every
	// finalizer but the bridge's.
	keys bool
	// compositionRefs: spec.crossplane's Composition and revision
	// references and update policy, which Crossplane writes as it selects.
	compositionRefs bool
}

var crossplaneOwnNothing = crossplaneOwn{}

// crossplaneOwn is what the bridge need not wake for on this kind: an
// InfraCluster's Composition reference is read to re-select it (reselect).
func (r *xrReconciler) crossplaneOwn() crossplaneOwn {
	_, cluster := r.contract.(infraCluster)
	return crossplaneOwn{keys: true, compositionRefs: !cluster}
}

// metadata is the metadata of u the bridge reads.
func (c crossplaneOwn) metadata(u *unstructured.Unstructured) [4]any {
	labels, annotations, finalizers := u.GetLabels(), u.GetAnnotations(), any(u.GetFinalizers())
	if c.keys {
		labels, annotations = withoutCrossplaneKeys(labels), withoutCrossplaneKeys(annotations)
		finalizers = controllerutil.ContainsFinalizer(u, infrav1.Finalizer)
	}
	return [4]any{labels, annotations, finalizers, u.GetOwnerReferences()}
}

// withoutCrossplaneKeys returns m without Crossplane's keys; m itself when it
// has none.
func withoutCrossplaneKeys(m map[string]string) map[string]string {
	var out map[string]string
	for k := range m {
		if !strings.HasPrefix(k, "crossplane.io/") || k == infrav1.CrossplanePausedAnnotation {
			continue
		}
		if out == nil {
			out = maps.Clone(m)
		}
		delete(out, k)
	}
	if out == nil {
		return m
	}
	return out
}

// spec is the spec the bridge reads, without Crossplane's Composition
// references when c says so.
func (c crossplaneOwn) spec(v any) any {
	spec, ok := v.(map[string]any)
	if !c.compositionRefs || !ok {
		return v
	}
	xp, ok := spec["crossplane"].(map[string]any)
	if !ok {
		return v
	}
	trimmed := maps.Clone(xp)
	for _, k := range compositionRefFields {
		delete(trimmed, k)
	}
	out := maps.Clone(spec)
	out["crossplane"] = trimmed
	if len(trimmed) == 0 {
		delete(out, "crossplane")
	}
	return out
}

// compositionRefFields are the fields of spec.crossplane Crossplane writes
// as it selects a Composition and its revision.
var compositionRefFields = []string{"compositionRef", "compositionRevisionRef", "compositionUpdatePolicy"}

// xrDeleted forgets what the bridge remembers of a deleted XR's conditions.
func (r *xrReconciler) xrDeleted(e event.DeleteEvent) bool {
	r.newest.forget(e.Object.GetUID())
	return true
}

// statusRead is what the bridge reads of an XR's status: all of it but the
// conditions, and what its Ready and Synced c say of generation gen
// (readiness.Observe) and whether Crossplane acknowledged a pause, which
// readies the XR for a move.
func statusRead(u *unstructured.Unstructured, gen int64, c xrConditions, m readiness.Mirror) map[string]any {
	status, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status")
	fields, _ := status.(map[string]any)
	out := make(map[string]any, len(fields)+2)
	for k, v := range fields {
		if k != "conditions" {
			out[k] = v
		}
	}
	out["observed"] = readiness.ObserveConditions(gen, meta.IsPaused(u), c.synced, c.ready, m)
	out["pause acknowledged"] = meta.IsPaused(u) && c.synced.Reason == xpv2.ReasonReconcilePaused
	return out
}
