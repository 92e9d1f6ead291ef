package controllers

// reconcileDelete deletes what an XR composed, then lets it go.

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/contract"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

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
	if err := r.composed.Hold(ctx, s.tree, denied != nil); err != nil {
		return ctrl.Result{}, err
	}
	remaining, err := r.composed.Delete(ctx, s.tree)
	if err != nil {
		return ctrl.Result{}, err
	}
	var foreign []string
	if s.tree != nil {
		foreign = s.tree.Foreign
	}
	if len(foreign) > 0 {
		v := verdict.NotReady(infrav1.NotControlledReason,
			"Not deleting %s: spec.crossplane.resourceRefs names them but this composite resource does not control them", contract.List(foreign))
		if s.owner == nil || len(remaining) > 0 {
			// The verdict's change is the event, when an owner shows it
			// and no wait below replaces it.
			s.event(corev1.EventTypeWarning, v.Reason, v.Message)
		}
		s.verdict = &v
	}
	if len(remaining) > 0 {
		msg := contract.Waiting("composed resources", remaining)
		if denied != nil {
			msg += ", which stay paused until a grant lets the provider delete them with the XR's credentials: " + denied.Message
		}
		s.verdict = &verdict.Verdict{Reason: infrav1.DeletingReason, Message: msg}
		return result, nil
	}
	ctrl.LoggerFrom(ctx).Info("Every composed resource is gone; releasing the composite resource")
	controllerutil.RemoveFinalizer(s.xr, infrav1.Finalizer)
	r.forget(s.xr.GetUID())
	if s.owner != nil {
		r.forget(s.owner.GetUID())
	}
	return ctrl.Result{}, nil
}
