package inplace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// ungranted is shared credentials granted to no namespace.
const ungranted = "shared-ungranted"

// A tenant bound in the Cluster's namespace to exactly the shipped
// capxp-system-tenant role tries to get its running workers onto shared
// credentials its namespace was not granted through an in-place update:
// by marking a worker's XR as CAPI marks one it updates in place, and by
// moving the class's workers to a template naming the credentials, which
// CAPI would update in place if CAPXP said so. Neither composes anything
// with them. It runs after TestClusterClassChangeInPlace, on its Cluster.
func TestTenantCannotMoveWorkersOntoUngrantedCredentialsInPlace(t *testing.T) {
	ctx := t.Context()
	admin := p.Management().Client
	tc := tenant(t)
	ref := map[string]any{"apiGroup": "kubernetes.m.crossplane.io", "kind": "ClusterProviderConfig", "name": ungranted}

	// Its own XR marked as CAPI marks one it updates in place, moved onto
	// the credentials.
	running := workerMachines(t, admin)
	m := &clusterv1.Machine{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: running[0]}, m); err != nil {
		t.Fatal(err)
	}
	xr := &unstructured.Unstructured{}
	xr.SetGroupVersionKind(infrav1.GroupVersion.WithKind(infrav1.CrossplaneMachineKind))
	if err := tc.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Spec.InfrastructureRef.Name}, xr); err != nil {
		t.Fatal(err)
	}
	before := xr.DeepCopy()
	a := xr.GetAnnotations()
	a[clusterv1.UpdateInProgressAnnotation] = ""
	xr.SetAnnotations(a)
	if err := unstructured.SetNestedMap(xr.Object, ref, "spec", "providerConfigRef"); err != nil {
		t.Fatal(err)
	}
	err := tc.Patch(ctx, xr, client.MergeFrom(before))
	if err == nil || !strings.Contains(err.Error(), "ClusterProviderConfigGrant") {
		t.Fatalf("the tenant's XR marked for an in-place update and moved onto %s: %v, want a refusal naming the missing grant", ungranted, err)
	}
	t.Logf("attack an XR marked for an in-place update, moved onto ungranted credentials: refused at admission: %s", firstLine(err.Error()))

	// The class's workers moved to a template naming the credentials:
	// CAPXP says the credentials never change in place, so CAPI rolls,
	// and each new XR is refused at admission.
	start := time.Now()
	workersOn(t, tc, ref)
	waitFor(t, "CAPI to try a new worker on the ungranted credentials", 3*time.Minute, refusedWorker)
	waits.Consistently(t, "nothing composed with the ungranted credentials", 20*time.Second, func() error {
		return nothingOn(ctx, admin, ref)
	})
	t.Logf("attack the class's workers moved to a template naming ungranted credentials: not updated in place; each new worker refused at admission, nothing composed with them (%s)", time.Since(start).Round(time.Second))
}

// tenant sets up the platform's side (the tenant role, shared credentials
// granted to no one) and returns a client impersonating a tenant bound in
// the Cluster's namespace to capxp-system-tenant.
func tenant(t *testing.T) client.Client {
	t.Helper()
	ctx := t.Context()
	admin := p.Management().Client
	role, err := capxp.Manifests.ReadFile("config/rbac/tenant.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cr := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(role, &cr.Object); err != nil {
		t.Fatal(err)
	}
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: ungranted}, Data: map[string][]byte{"kubeconfig": p.Workload.Kubeconfig}}
	shared := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "ClusterProviderConfig",
		"metadata": map[string]any{"name": ungranted},
		"spec": map[string]any{"credentials": map[string]any{"source": "Secret",
			"secretRef": map[string]any{"namespace": "default", "name": ungranted, "key": "kubeconfig"}}},
	}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.GetName()},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}},
	}
	for _, o := range []client.Object{cr, creds, shared, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatalf("%s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	cfg := rest.CopyConfig(p.Management().Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "tenant", Groups: []string{"system:authenticated"}}
	tc, err := client.New(cfg, client.Options{Scheme: p.Management().Scheme})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the tenant's role in force", 30*time.Second, func() error {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "patch", Group: clusterv1.GroupVersion.Group, Resource: "clusterclasses"},
		}}
		if err := tc.Create(ctx, review); err != nil {
			return err
		}
		if !review.Status.Allowed {
			return fmt.Errorf("not yet: %s", review.Status.Reason)
		}
		return nil
	})
	return tc
}

// workersOn points the ClusterClass's worker class, as c, at a copy of its
// CrossplaneMachineTemplate naming the credentials ref.
func workersOn(t *testing.T, c client.Client, ref map[string]any) {
	t.Helper()
	apply(t, c, repointWorkers(t, c, "-"+ungranted, func(spec map[string]any) error {
		return unstructured.SetNestedMap(spec, ref, "template", "spec", "providerConfigRef")
	}))
}

// refusedWorker returns nil once CAPI has been refused a new worker XR at
// admission for want of a grant. CAPI's MachineSet controller records the
// refusal only as its reconcile's error, in its log.
func refusedWorker() error {
	log, err := os.ReadFile(filepath.Join(p.Dir(), "capi-controller-manager.log"))
	if err != nil {
		return err
	}
	want := "denied the request: spec.providerConfigRef: namespace " + ns + " may not use ClusterProviderConfig kubernetes.m.crossplane.io/" + ungranted
	if !strings.Contains(string(log), want) {
		return fmt.Errorf("CAPI's log does not say %q yet", want)
	}
	return nil
}

// nothingOn says which XR or composed Object of the namespace names the
// credentials ref, and which Machine is being updated in place.
func nothingOn(ctx context.Context, c client.Client, ref map[string]any) error {
	for _, kind := range []string{infrav1.CrossplaneMachineKind + "List"} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(infrav1.GroupVersion.WithKind(kind))
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, o := range list.Items {
			if name, _, _ := unstructured.NestedString(o.Object, "spec", "providerConfigRef", "name"); name == ref["name"] {
				return fmt.Errorf("%s %s names %s", o.GetKind(), o.GetName(), name)
			}
		}
	}
	objects := &unstructured.UnstructuredList{}
	objects.SetAPIVersion("kubernetes.m.crossplane.io/v1alpha1")
	objects.SetKind("ObjectList")
	if err := c.List(ctx, objects, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, o := range objects.Items {
		if name, _, _ := unstructured.NestedString(o.Object, "spec", "providerConfigRef", "name"); name == ref["name"] {
			return fmt.Errorf("Object %s names %s", o.GetName(), name)
		}
	}
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(ns)); err != nil {
		return err
	}
	for i := range machines.Items {
		if _, ok := machines.Items[i].Annotations[clusterv1.UpdateInProgressAnnotation]; ok {
			return fmt.Errorf("Machine %s is being updated in place", machines.Items[i].Name)
		}
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
