package envtest

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composed"
)

// compositeLabel is the label Crossplane puts on a composed resource, naming
// its XR.
const compositeLabel = "crossplane.io/composite"

// Provider is the managed resource controller for the integration tests'
// Stubs: a provider whose cloud answers with what the test scripted. Crossplane
// and the bridge are real; only the cloud is not. For each Stub it adds
// HoldFinalizer (a provider's cleanup finalizer, which tests remove to let
// the Stub go); Delay after the Stub's creation it reports spec.observe as
// status.atProvider and Ready=True, or Ready=False while it waits.
type Provider struct {
	Client client.Client
	Delay  time.Duration
}

// SetupWithManager runs the provider in a manager.
func (p *Provider) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("test-provider").
		For(&newStub().Unstructured).
		Complete(p)
}

// Reconcile observes one Stub.
func (p *Provider) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// The manager's cache knows plain unstructured objects only.
	s := newStub()
	if err := p.Client.Get(ctx, req.NamespacedName, &s.Unstructured); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.GetDeletionTimestamp().IsZero() {
		// The cloud deletes it; the test decides when it is gone.
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(s, HoldFinalizer) {
		return ctrl.Result{}, ignoreConflict(p.Client.Update(ctx, &s.Unstructured))
	}
	if age := time.Since(s.GetCreationTimestamp().Time); age < p.Delay {
		if s.GetCondition(xpv2.TypeReady).Reason != xpv2.ReasonCreating {
			s.SetConditions(xpv2.Creating())
			if err := p.Client.Status().Update(ctx, &s.Unstructured); err != nil {
				return ctrl.Result{}, ignoreConflict(err)
			}
		}
		return ctrl.Result{RequeueAfter: p.Delay - age}, nil
	}
	observed := map[string]any{}
	if raw, _, _ := unstructured.NestedString(s.Object, "spec", "observe"); raw != "" {
		raw = strings.ReplaceAll(raw, "{{name}}", s.GetLabels()[compositeLabel])
		if err := json.Unmarshal([]byte(raw), &observed); err != nil {
			return ctrl.Result{}, errors.Wrap(err, "bad observation script")
		}
	}
	before := s.DeepCopy()
	if err := unstructured.SetNestedField(s.Object, observed, "status", "atProvider"); err != nil {
		return ctrl.Result{}, err
	}
	s.SetConditions(xpv2.Available())
	if equalStatus(before.Object, s.Object) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, ignoreConflict(p.Client.Status().Update(ctx, &s.Unstructured))
}

func newStub() *composed.Unstructured {
	return composed.New(composed.FromReference(corev1.ObjectReference{APIVersion: StubGVK.GroupVersion().String(), Kind: StubGVK.Kind}))
}

// equalStatus compares two statuses ignoring condition transition times.
func equalStatus(a, b map[string]any) bool {
	strip := func(o map[string]any) string {
		st, _, _ := unstructured.NestedMap(o, "status")
		if cs, ok := st["conditions"].([]any); ok {
			for _, c := range cs {
				if m, ok := c.(map[string]any); ok {
					delete(m, "lastTransitionTime")
				}
			}
		}
		raw, err := json.Marshal(st)
		if err != nil {
			return err.Error()
		}
		return string(raw)
	}
	return strip(a) == strip(b)
}

// ignoreConflict requeues a conflict quietly: the next event brings the
// newer object.
func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
