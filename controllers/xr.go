package controllers

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/contract"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/readiness"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/composed"
)

const (
	errGetXR        = "cannot get composite resource"
	errResolveCreds = "cannot resolve credentials"
	errWriteOwner   = "cannot write the verdict on the CAPI owner"
)

const (
	// actionReconcile is the action of the events the bridge records on XRs.
	actionReconcile = "Reconcile"
	// conflictRequeue is how soon an XR whose write met a newer object is
	// read again.
	conflictRequeue = 100 * time.Millisecond
	// reconcileTimeout bounds one reconcile of one XR, its writes included.
	reconcileTimeout = time.Minute
	// annotationTrue is the value of a set boolean annotation.
	annotationTrue = "true"
)

// seam is what differs between the InfraCluster, InfraMachine and
// ControlPlane contracts; everything else about an adapted XR (finalizer,
// pause, credentials, deletion, the one deferred write) is the
// xrReconciler's.
type seam interface {
	// conditionType is the condition of the owner the verdict goes to.
	conditionType() string
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
	prepare(ctx context.Context, s *scope) (*verdict.Verdict, error)
	// outputs maps the composition's outputs: their field errors, and the
	// spec fields to set once the XR satisfies its contract, with an event
	// message for the first time it does (none when empty).
	outputs(s *scope) (set func(*unstructured.Unstructured), provisioned string, errs field.ErrorList)
	// milestone is the contract's status once the XR satisfies it: the
	// milestone that never goes back, and what goes with it.
	milestone(xr *unstructured.Unstructured) map[string]any
	// publish writes what the contract asks of the provider besides the
	// XR, once the XR satisfies its contract: a verdict while it cannot,
	// and when to look again.
	publish(ctx context.Context, s *scope) (*verdict.Verdict, ctrl.Result, error)
	// waitBeforeDelete names what must be gone before the XR's own
	// composed resources go; nil when nothing.
	waitBeforeDelete(ctx context.Context, xr *composite.Unstructured) (*verdict.Verdict, error)
	// watches are the CAPI objects whose changes concern XRs of the kind.
	watches(k *kindControllers, gvk schema.GroupVersionKind, xr *unstructured.Unstructured) []watch
}

// watcher starts a watch once per kind, as the reconciler learns of kinds
// (composed kinds, credentials kinds): CAPI's external.ObjectTracker.
type watcher interface {
	Watch(log logr.Logger, obj client.Object, h handler.EventHandler, p ...predicate.Predicate) error
}

// xrReconciler makes the XRs of one kind CAPI infrastructure objects, of the
// contract its seam implements.
type xrReconciler struct {
	client      client.Client
	gvk         schema.GroupVersionKind
	contract    seam
	recorder    events.EventRecorder
	tracker     watcher
	credentials credentials.Resolver
	// memory is what the reconciler remembers of each object.
	memory memory
	// composed is what the XRs composed.
	composed composed.Resources
	// access says which kinds the bridge may read.
	access *readAccess
}

// forget drops everything the reconciler remembers of an object. It is
// called once an XR is let go or gone, for the XR and its owner.
func (r *xrReconciler) forget(uid types.UID) {
	r.memory.forget(uid)
	waiting.set(uid, waitingXR{}, false)
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
	verdict *verdict.Verdict
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
	// readySince is when Crossplane reported the XR Ready, when this
	// reconcile provisions it.
	readySince time.Time
	// paused is CAPI's pause of the XR or its Cluster.
	paused bool
	// tree is what the XR composed, read once.
	tree *composed.Tree
	// endpointFromControlPlane: the Cluster's control plane is a managed
	// one that provides the endpoint, so its infrastructure XR need not.
	endpointFromControlPlane bool
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
		// The namespace spent its budget of Secret reads: nothing was
		// decided on credentials; try again once it has one, quietly.
		if after, ok := spent(reterr); ok {
			log.V(4).Info("Credentials Secret read budget spent; requeueing", "after", after)
			result, reterr = ctrl.Result{RequeueAfter: after}, nil
		}
		r.countWaiting(s)
	}()

	// What it composed is read once; every path below acts on this read.
	var err error
	if s.tree, err = r.composed.Observe(ctx, xr); err != nil {
		return ctrl.Result{}, err
	}

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

	if s.owner, s.cluster, err = r.contract.owner(ctx, xr); err != nil {
		return ctrl.Result{}, err
	}
	if s.owner != nil {
		ctx = ctrl.LoggerInto(ctx, log.WithValues(s.owner.GetObjectKind().GroupVersionKind().Kind, klog.KObj(s.owner)))
	}
	paused := annotations.HasPaused(xr) || s.cluster != nil && annotations.IsPaused(s.cluster, xr)
	s.paused = paused

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
			return ctrl.Result{}, r.composed.Hold(ctx, s.tree, true)
		}
		return ctrl.Result{}, r.guardForMove(ctx, s)
	}
	return r.reconcileNormal(ctx, s)
}

// conflicted reports whether err is a conflict, or aggregates (as the
// deferred write's error does) only conflicts.
// spent reports whether err is only that the namespace spent its budget of
// Secret reads, and when to try again.
func spent(err error) (time.Duration, bool) {
	var agg kerrors.Aggregate
	if errors.As(err, &agg) {
		var after time.Duration
		for _, e := range agg.Errors() {
			d, ok := spent(e)
			if !ok {
				return 0, false
			}
			after = max(after, d)
		}
		return after, len(agg.Errors()) > 0
	}
	var be *budgetExceeded
	if errors.As(err, &be) {
		return be.RetryAfter, true
	}
	return 0, false
}

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
		return result, r.composed.Hold(ctx, s.tree, true)
	}
	// Whether or not the XR is still paused: a release decided on a read
	// of its composed resources older than the hold lifts the XR's pause
	// and leaves theirs, and their watch brings the XR back here when the
	// newer read arrives.
	if err := r.composed.Hold(ctx, s.tree, false); err != nil {
		return ctrl.Result{}, err
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
		return result, r.composed.Hold(ctx, s.tree, true)
	}
	// Guards a pause or a move left, and a hold for credentials, go before
	// the XR is Crossplane's again; while they cannot, it stays as it was.
	if err := r.unguard(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	// What it composed that the bridge held resumes, whether or not the
	// XR is still paused (see holdUnlessGranted).
	if err := r.composed.Hold(ctx, s.tree, false); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.reselect(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	s.pause(false)
	controllerutil.AddFinalizer(s.xr, infrav1.Finalizer)

	u := &s.xr.Unstructured
	set, provisioned, errs := r.contract.outputs(s)
	// The newest Ready and Synced read, not one Crossplane put back from a
	// stale read (readiness.Replaced).
	c := r.memory.read(u)
	v := contract.Evaluate(readiness.ObserveConditions(u.GetGeneration(), false, c.synced, c.ready, r.memory.mirror(s.xr.GetUID())), errs)
	if v.Ready {
		held, again, err := r.contract.publish(ctx, s)
		if err != nil {
			return ctrl.Result{}, err
		}
		if held != nil {
			v = *held
		}
		result = util.LowestNonZeroResult(result, again)
	}
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
	stale := !isProvisioned(u) && r.memory.already(s.xr, partProvisioned, "true")
	was := isProvisioned(u) || stale
	now := contract.Provisioned(was, v)
	r.blockMove(ctx, s, now)
	if now && !stale {
		// Every field, always: a server-side apply that leaves one out
		// releases it. Nothing is written before provisioning: absent is
		// not provisioned, and provisioned never goes back to false.
		s.status = &statusApply{fields: r.contract.milestone(u)}
		if !was && c.ready.Status == corev1.ConditionTrue {
			s.readySince = c.ready.LastTransitionTime.Time
		}
	}
	if now && !was && provisioned != "" {
		s.event(corev1.EventTypeNormal, "Provisioned", provisioned)
	}
	return result, nil
}
