package xr

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
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/lifecycle"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/readiness"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/access"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/apply"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/budget"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/composed"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/contracts"
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

// watcher starts a watch once per kind, as the reconciler learns of kinds
// (composed kinds, credentials kinds): CAPI's external.ObjectTracker.
type watcher interface {
	Watch(log logr.Logger, obj client.Object, h handler.EventHandler, p ...predicate.Predicate) error
}

// xrReconciler makes the XRs of one kind CAPI infrastructure objects, of the
// contract its contracts.Contract implements.
type xrReconciler struct {
	client      client.Client
	gvk         schema.GroupVersionKind
	contract    contracts.Contract
	recorder    events.EventRecorder
	tracker     watcher
	credentials credentials.Resolver
	// memory is what the reconciler remembers of each object.
	memory memory
	// composed is what the XRs composed.
	composed composed.Resources
	// access says which kinds the bridge may read.
	access *access.Reads
	// waiting is the XRs CAPI waits for, shared by every kind.
	waiting *waitingXRs
}

// forget drops everything the reconciler remembers of an object. It is
// called once an XR is let go or gone, for the XR and its owner.
func (r *xrReconciler) forget(uid types.UID) {
	r.memory.forget(uid)
	r.waiting.set(uid, waitingXR{}, false)
}

// scope is one reconcile's working state: what the contract sees
// (contracts.Scope: the working copy of the XR, its owner and Cluster, the
// events to record) and what the reconciler adds. Phases change the working
// copy (metadata and spec) and say what to write; write sends it all once,
// at the end.
type scope struct {
	contracts.Scope
	// before is what was read.
	before *unstructured.Unstructured
	// verdict goes to the owner's CrossplaneInfrastructureReady condition
	// and, when it changes, to an event on the XR; nil leaves it.
	verdict *verdict.Verdict
	// status holds the contract status fields to apply; nil applies none.
	status *apply.StatusApply
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
	// recalled is what the bridge's memory held of the XR when it was read.
	recalled recalled
	// selection is what a re-selection decides on; nil when there is none.
	selection *reselection
	// refused is why the credentials were refused ("" when they may be
	// used); nil when they were not checked.
	refused *string
}

// recalled is what a reconcile reads of the bridge's memory of the XR, once,
// as it observes.
type recalled struct {
	// conditions are the newest Synced and Ready read of the XR.
	conditions xrConditions
	// mirror is the bridge's last copy of the outputs into the spec.
	mirror readiness.Mirror
	// provisioned: the bridge wrote the provisioned milestone over this
	// version of the XR or an older one.
	provisioned bool
}

// heldForCredentials says whether the XR was read held for its credentials.
func (s *scope) heldForCredentials() bool {
	return s.before.GetAnnotations()[infrav1.CredentialsHoldAnnotation] == annotationTrue
}

// edit changes the working copy as the plan says.
func (s *scope) edit(e lifecycle.Edit) {
	switch e.Pause {
	case lifecycle.PauseLeave:
	case lifecycle.PauseHold:
		// Marked, so that the bridge knows to lift this hold, and only
		// this one, once the credentials may be used.
		meta.AddAnnotations(s.XR, map[string]string{infrav1.CrossplanePausedAnnotation: annotationTrue, infrav1.CredentialsHoldAnnotation: annotationTrue})
	case lifecycle.PauseSet:
		meta.RemoveAnnotations(s.XR, infrav1.CredentialsHoldAnnotation)
		meta.AddAnnotations(s.XR, map[string]string{meta.AnnotationKeyReconciliationPaused: annotationTrue})
	case lifecycle.PauseLift:
		meta.RemoveAnnotations(s.XR, infrav1.CredentialsHoldAnnotation, meta.AnnotationKeyReconciliationPaused)
	}
	switch e.Finalizer {
	case lifecycle.FinalizerLeave:
	case lifecycle.FinalizerAdd:
		controllerutil.AddFinalizer(s.XR, infrav1.Finalizer)
	case lifecycle.FinalizerRemove:
		controllerutil.RemoveFinalizer(s.XR, infrav1.Finalizer)
	}
	if e.DropBlockMove {
		meta.RemoveAnnotations(s.XR, infrav1.BlockMoveAnnotation)
	}
}

// Reconcile maps one XR onto its contract in three steps, with one deferred
// write: observe reads the XR, its owner and Cluster, what it composed
// and, as its path needs them, the contract's gate, what must go before it,
// its credentials and what its contract publishes; lifecycle.Decide plans
// from that alone, and decideMapping, for an XR the plan maps, its mapping
// onto the contract; act carries out both, in their order.
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

	s := &scope{Scope: contracts.Scope{XR: xr}, before: xr.Unstructured.DeepCopy()}
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
		if after, ok := budget.Spent(reterr); ok {
			log.V(4).Info("Credentials Secret read budget spent; requeueing", "after", after)
			result, reterr = ctrl.Result{RequeueAfter: after}, nil
		}
		r.countWaiting(s)
	}()

	o, err := r.observe(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	if s.Owner != nil {
		ctx = ctrl.LoggerInto(ctx, log.WithValues(s.Owner.GetObjectKind().GroupVersionKind().Kind, klog.KObj(s.Owner)))
	}
	p := lifecycle.Decide(o)
	var m *mapping
	if p.Map {
		m = r.decideMapping(s)
	}
	return r.act(ctx, s, p, m)
}

// observe reads what the decision needs, each once: what the XR composed,
// its owner and Cluster (an externally managed XR's are not the bridge's
// concern), then what its path decides on (lifecycle.Observed). The
// contract's gate may inject spec fields into the working copy (a machine
// inherits its cluster's credentials), so the credentials are read after
// it.
func (r *xrReconciler) observe(ctx context.Context, s *scope) (lifecycle.Observed, error) {
	xr := s.XR
	s.recalled = recalled{
		conditions:  r.memory.read(s.before),
		mirror:      r.memory.mirror(xr.GetUID()),
		provisioned: r.memory.Already(s.before, partProvisioned, "true"),
	}
	f := lifecycle.Facts{
		Deleting:           !xr.GetDeletionTimestamp().IsZero(),
		ExternallyManaged:  annotations.IsExternallyManaged(xr),
		Finalizer:          controllerutil.ContainsFinalizer(xr, infrav1.Finalizer),
		Composed:           len(xr.GetResourceReferences()) > 0,
		CrossplanePaused:   meta.IsPaused(s.before),
		PauseAcknowledged:  readiness.Condition(s.before.Object, xpv2.TypeSynced).Reason == xpv2.ReasonReconcilePaused,
		HeldForCredentials: s.heldForCredentials(),
		PauseUnowned:       r.contract.PauseUnowned(xr),
		Reselects:          r.contract.Reselects(),
	}
	_, f.BlockMove = xr.GetAnnotations()[infrav1.BlockMoveAnnotation]
	var err error
	if s.tree, err = r.composed.Observe(ctx, xr); err != nil {
		return lifecycle.Observed{}, err
	}
	if f.ExternallyManaged {
		f.Paused = annotations.HasPaused(xr)
	} else {
		if err := r.contract.Owner(ctx, &s.Scope); err != nil {
			return lifecycle.Observed{}, err
		}
		f.Owned = s.Owner != nil
		f.Paused = annotations.HasPaused(xr) || s.Cluster != nil && annotations.IsPaused(s.Cluster, xr)
		s.paused = f.Paused
	}
	o := lifecycle.Observed{Facts: f, Own: s.tree.OwnNames()}
	if s.tree != nil {
		o.Foreign = s.tree.Foreign
	}
	switch f.Path() {
	case lifecycle.Moved:
		return o, nil
	case lifecycle.External:
		if f.Deleting {
			return o, nil
		}
	case lifecycle.Deleting:
		if !f.Finalizer {
			return o, nil
		}
		if o.WaitBeforeDelete, err = r.contract.WaitBeforeDelete(ctx, xr); err != nil || o.WaitBeforeDelete != nil {
			return o, err
		}
	case lifecycle.Active:
		if o.Gate, err = r.contract.Prepare(ctx, &s.Scope); err != nil || o.Gate != nil {
			return o, err
		}
		if err := r.contract.ObservePublished(ctx, &s.Scope); err != nil {
			return o, err
		}
	}
	o.Denied, o.DeniedRecheck, s.refused, err = r.checkCredentials(ctx, xr)
	if err != nil || o.Denied != nil || !f.Reselects || f.Path() != lifecycle.Active {
		return o, err
	}
	s.selection, err = r.observeSelection(ctx, xr)
	return o, err
}

// act carries out a plan: the working copy's edits, which the deferred write
// sends, the acts on what the XR composed, and the mapping (nil for none). The
// verdict and the events go out with the write whatever the acts do: they
// say what was decided. An act that fails ends the reconcile with its error,
// before the edits that would release the XR.
func (r *xrReconciler) act(ctx context.Context, s *scope, p lifecycle.Plan, m *mapping) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	log.V(4).Info("Reconciling composite resource", "path", p.Path)
	r.countRefusal(s)
	s.edit(p.Before)
	s.verdict = p.Verdict
	for _, e := range p.Events {
		s.Event(e.Type, e.Reason, e.Message)
	}
	if err := r.actOnComposed(ctx, s, p.Composed); err != nil {
		return ctrl.Result{}, err
	}
	if p.Reselect {
		if err := r.reselect(s); err != nil {
			return ctrl.Result{}, err
		}
	}
	s.edit(p.After)
	if p.Forget {
		if s.tree != nil && len(s.tree.Foreign) > 0 {
			log.Info("Every composed resource it controls is gone; releasing the composite resource", "notControlled", s.tree.Foreign)
		} else {
			log.Info("Every composed resource is gone; releasing the composite resource")
		}
		r.forget(s.XR.GetUID())
		if s.Owner != nil {
			r.forget(s.Owner.GetUID())
		}
	}
	result := ctrl.Result{RequeueAfter: p.RequeueAfter}
	if m == nil {
		return result, nil
	}
	if err := r.applyMapping(ctx, s, m); err != nil {
		return ctrl.Result{}, err
	}
	return util.LowestNonZeroResult(result, m.again), nil
}

// actOnComposed acts on what the XR composed, in the plan's order. A guard
// that cannot be set is an event too: clusterctl move waits, then refuses.
func (r *xrReconciler) actOnComposed(ctx context.Context, s *scope, c lifecycle.Composed) error {
	if c.Unguard {
		if err := r.composed.Guard(ctx, s.tree, false); err != nil {
			return err
		}
	}
	if c.Hold != lifecycle.Leave {
		if err := r.composed.Hold(ctx, s.tree, c.Hold == lifecycle.On); err != nil {
			return err
		}
	}
	if c.LabelCRDs {
		r.labelComposedCRDs(ctx, s)
	}
	if c.Guard {
		if err := r.composed.Guard(ctx, s.tree, true); err != nil {
			s.Event(corev1.EventTypeWarning, "MoveBlocked", err.Error())
			return err
		}
	}
	if c.Delete {
		return r.composed.Delete(ctx, s.tree)
	}
	return nil
}

// conflicted reports whether err is a conflict, or aggregates (as the
// deferred write's error does) only conflicts.
func conflicted(err error) bool {
	return err != nil && kerrors.FilterOut(err, func(e error) bool { return apierrors.IsConflict(errors.Cause(e)) }) == nil
}
