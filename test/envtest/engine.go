package envtest

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"
	"k8s.io/utils/ptr"
)

// Annotations that script the test composition engine.
const (
	// EngineOutputsAnnotation holds JSON merged into the XR's status once it
	// is composed: outputs, failureDomains, addresses... Every {{name}} in it
	// is replaced by the XR's name, so that one template scripts many XRs.
	EngineOutputsAnnotation = "engine.test.capxp.dev/status"
	// EngineFailAnnotation makes composition fail with its value as message.
	EngineFailAnnotation = "engine.test.capxp.dev/fail"
	// EngineHoldFinalizer is put on composed resources; tests remove it to
	// let a composed resource go.
	EngineHoldFinalizer = "engine.test.capxp.dev/hold"

	crossplaneFinalizer = "composite.apiextensions.crossplane.io"
)

// Engine stands in for Crossplane's composite reconciler in integration
// tests. For each XR of its kind it behaves as Crossplane v2 does where the
// bridge can tell: while crossplane.io/paused is set it only reports
// Synced=False (ReconcilePaused), also while the XR is being deleted; it adds
// its finalizer; on a scripted failure it marks every condition it does not
// own Unknown, as Crossplane does after a fatal pipeline result; otherwise,
// after Delay, it
// composes one resource (a ConfigMap controlled by the XR, listed in
// spec.crossplane.resourceRefs), then reports Ready and Synced for the current
// generation and writes the scripted status. On deletion it removes only its
// own finalizer, leaving composed resources behind. It writes status with
// Update, read-modify-write, as Crossplane does.
type Engine struct {
	Client client.Client
	GVK    schema.GroupVersionKind
	Delay  time.Duration
}

// SetupWithManager runs the engine in a manager.
func (e *Engine) SetupWithManager(mgr ctrl.Manager) error {
	xr := &unstructured.Unstructured{}
	xr.SetGroupVersionKind(e.GVK)
	return ctrl.NewControllerManagedBy(mgr).
		Named("test-engine-" + e.GVK.Kind).
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		For(xr).
		Complete(e)
}

// Reconcile composes one XR.
func (e *Engine) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	xr := composite.New(composite.WithGroupVersionKind(e.GVK))
	if err := e.Client.Get(ctx, req.NamespacedName, &xr.Unstructured); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	gen := xr.GetGeneration()
	// Crossplane checks the pause before the deletion: a paused XR keeps
	// its finalizer even while being deleted.
	if meta.IsPaused(xr) {
		xr.SetConditions(xpv2.ReconcilePaused().WithObservedGeneration(gen))
		return ctrl.Result{}, e.updateStatus(ctx, xr)
	}
	if !xr.GetDeletionTimestamp().IsZero() {
		if controllerutil.RemoveFinalizer(xr, crossplaneFinalizer) {
			return ctrl.Result{}, client.IgnoreNotFound(e.Client.Update(ctx, xr))
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(xr, crossplaneFinalizer) {
		return ctrl.Result{}, e.Client.Update(ctx, xr)
	}
	if msg, ok := xr.GetAnnotations()[EngineFailAnnotation]; ok {
		xr.SetConditions(
			xpv2.ReconcileError(errors.New(msg)).WithObservedGeneration(gen),
			xpv2.Creating().WithObservedGeneration(gen),
		)
		// On a fatal pipeline result Crossplane marks every condition it
		// does not own as a system condition Unknown: a second writer of
		// any of them would be woken, and would wake Crossplane, forever.
		for _, c := range xr.GetConditions() {
			if c.Type == xpv2.TypeReady || c.Type == xpv2.TypeSynced || c.Type == "Responsive" {
				continue
			}
			c.Status, c.Reason, c.Message = corev1.ConditionUnknown, "FatalError", "A fatal error occurred before the status of this condition could be determined."
			xr.SetConditions(c)
		}
		return ctrl.Result{}, e.updateStatus(ctx, xr)
	}
	if age := time.Since(xr.GetCreationTimestamp().Time); age < e.Delay {
		xr.SetConditions(
			xpv2.ReconcileSuccess().WithObservedGeneration(gen),
			xpv2.Creating().WithMessage("Unready resources: composed").WithObservedGeneration(gen),
		)
		if err := e.updateStatus(ctx, xr); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: e.Delay - age}, nil
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: xr.GetNamespace(), Name: xr.GetName() + "-composed"}}
	if _, err := controllerutil.CreateOrUpdate(ctx, e.Client, cm, func() error {
		controllerutil.AddFinalizer(cm, EngineHoldFinalizer)
		return controllerutil.SetControllerReference(xr, cm, e.Client.Scheme())
	}); err != nil && !apierrors.IsConflict(err) {
		return ctrl.Result{}, errors.Wrap(err, "cannot compose")
	}
	if len(xr.GetResourceReferences()) == 0 {
		xr.SetResourceReferences([]corev1.ObjectReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name}})
		return ctrl.Result{}, e.Client.Update(ctx, xr)
	}

	if raw, ok := xr.GetAnnotations()[EngineOutputsAnnotation]; ok {
		status := map[string]any{}
		raw = strings.ReplaceAll(raw, "{{name}}", xr.GetName())
		if err := json.Unmarshal([]byte(raw), &status); err != nil {
			return ctrl.Result{}, errors.Wrap(err, "bad engine script")
		}
		for k, v := range status {
			if err := unstructured.SetNestedField(xr.Object, v, "status", k); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	xr.SetConditions(xpv2.ReconcileSuccess().WithObservedGeneration(gen), xpv2.Available().WithObservedGeneration(gen))
	return ctrl.Result{}, e.updateStatus(ctx, xr)
}

// updateStatus writes the whole status back, as Crossplane does; a conflict
// just means another writer got there first, so the engine tries again.
func (e *Engine) updateStatus(ctx context.Context, xr *composite.Unstructured) error {
	err := e.Client.Status().Update(ctx, xr)
	if apierrors.IsConflict(err) {
		return err
	}
	return client.IgnoreNotFound(err)
}
