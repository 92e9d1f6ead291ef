package bench

import (
	"context"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

var (
	clusterGVK   = infrav1.GroupVersion.WithKind(infrav1.CrossplaneClusterKind)
	machineGVK   = infrav1.GroupVersion.WithKind(infrav1.CrossplaneMachineKind)
	bootstrapGVK = schema.GroupVersionKind{Group: envtest.TestBootstrapGroup, Version: "v1alpha1", Kind: "TestBootstrapConfig"}
)

const endpointHost = "lb.bench.example.org"

// providerIDScheme starts every machine's provider ID.
const providerIDScheme = "bench:///"

// clusterOutputs and machineOutputs are what the infrastructure reports.
func clusterOutputs() map[string]any {
	return map[string]any{
		"outputs": map[string]any{
			"controlPlaneEndpoint": map[string]any{"host": endpointHost, "port": int64(6443)},
			"network": map[string]any{"id": "vpc-1", "subnets": []any{
				map[string]any{"id": "subnet-a", "failureDomain": "zone-a", "role": "Private"},
			}},
		},
		"failureDomains": []any{map[string]any{"name": "zone-a", "controlPlane": true}},
	}
}

func machineOutputs(name string) map[string]any {
	return map[string]any{
		"outputs":       map[string]any{"providerID": providerIDScheme + name},
		"addresses":     []any{map[string]any{"type": "InternalIP", "address": "10.0.0.1"}},
		"failureDomain": "zone-a",
	}
}

func unstructuredOf(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// ideal is L0: a hand-written provider for the same XRs. A cluster XR gets
// its endpoint in one spec patch and provisioned in one status patch; a
// machine XR waits, as every provider does, for its Machine's bootstrap
// data, then gets its providerID in one spec patch and provisioned in one
// status patch.
type ideal struct {
	client client.Client
	gvk    schema.GroupVersionKind
}

func (p *ideal) setup(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).Named("ideal-" + p.gvk.Kind).For(unstructuredOf(p.gvk)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 10})
	if p.gvk == machineGVK {
		b = b.Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(util.MachineToInfrastructureMapFunc(machineGVK)))
	}
	return b.Complete(p)
}

func (p *ideal) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	xr := unstructuredOf(p.gvk)
	if err := p.client.Get(ctx, req.NamespacedName, xr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if done, _, _ := unstructured.NestedBool(xr.Object, "status", "initialization", "provisioned"); done {
		return ctrl.Result{}, nil
	}
	status := clusterOutputs()
	specField, specValue := "controlPlaneEndpoint", any(map[string]any{"host": endpointHost, "port": int64(6443)})
	if p.gvk == machineGVK {
		m, err := util.GetOwnerMachine(ctx, p.client, metav1.ObjectMeta{Namespace: xr.GetNamespace(), OwnerReferences: xr.GetOwnerReferences()})
		if err != nil || m == nil || m.Spec.Bootstrap.DataSecretName == nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		status = machineOutputs(xr.GetName())
		specField, specValue = "providerID", providerIDScheme+xr.GetName()
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(xr.Object, "spec", specField); !found {
		before := xr.DeepCopy()
		if err := unstructured.SetNestedField(xr.Object, specValue, "spec", specField); err != nil {
			return ctrl.Result{}, err
		}
		if err := p.client.Patch(ctx, xr, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := xr.DeepCopy()
	for k, v := range status {
		if err := unstructured.SetNestedField(xr.Object, v, "status", k); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := unstructured.SetNestedField(xr.Object, true, "status", "initialization", "provisioned"); err != nil {
		return ctrl.Result{}, err
	}
	if err := unstructured.SetNestedField(xr.Object, true, "status", "ready"); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, ignoreConflict(p.client.Status().Patch(ctx, xr, client.MergeFrom(before)))
}

// engine is L2's minimal composition engine: for an unpaused XR whose
// conditions are not for its current generation it makes one status write,
// Ready and Synced with the outputs, from its cache.
type engine struct {
	client client.Client
	gvk    schema.GroupVersionKind
}

func (e *engine) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("engine-" + e.gvk.Kind).For(unstructuredOf(e.gvk)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 10}).Complete(e)
}

func (e *engine) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	xr := composite.New(composite.WithGroupVersionKind(e.gvk))
	if err := e.client.Get(ctx, req.NamespacedName, &xr.Unstructured); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	gen := xr.GetGeneration()
	if meta.IsPaused(xr) || !xr.GetDeletionTimestamp().IsZero() || xr.GetCondition(xpv2.TypeReady).ObservedGeneration == gen {
		return ctrl.Result{}, nil
	}
	status := clusterOutputs()
	if e.gvk == machineGVK {
		status = machineOutputs(xr.GetName())
	}
	for k, v := range status {
		if err := unstructured.SetNestedField(xr.Object, v, "status", k); err != nil {
			return ctrl.Result{}, err
		}
	}
	xr.SetConditions(xpv2.ReconcileSuccess().WithObservedGeneration(gen), xpv2.Available().WithObservedGeneration(gen))
	return ctrl.Result{}, ignoreConflict(e.client.Status().Update(ctx, &xr.Unstructured))
}

// bootstrapper plays the bootstrap provider, outside what is measured: it
// writes each TestBootstrapConfig's data secret and reports it.
type bootstrapper struct{ client client.Client }

func (b *bootstrapper) setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("bootstrap").For(unstructuredOf(bootstrapGVK)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 10}).Complete(b)
}

func (b *bootstrapper) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := unstructuredOf(bootstrapGVK)
	if err := b.client.Get(ctx, req.NamespacedName, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if done, _, _ := unstructured.NestedBool(c.Object, "status", "initialization", "dataSecretCreated"); done {
		return ctrl.Result{}, nil
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.GetNamespace(), Name: c.GetName(), Labels: map[string]string{clusterv1.ClusterNameLabel: c.GetLabels()[clusterv1.ClusterNameLabel]}},
		Type:       clusterv1.ClusterSecretType,
		Data:       map[string][]byte{"value": []byte("#cloud-config\n")},
	}
	if err := client.IgnoreAlreadyExists(b.client.Create(ctx, secret)); err != nil {
		return ctrl.Result{}, err
	}
	before := c.DeepCopy()
	_ = unstructured.SetNestedField(c.Object, c.GetName(), "status", "dataSecretName")
	_ = unstructured.SetNestedField(c.Object, true, "status", "initialization", "dataSecretCreated")
	return ctrl.Result{}, ignoreConflict(b.client.Status().Patch(ctx, c, client.MergeFrom(before)))
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}
