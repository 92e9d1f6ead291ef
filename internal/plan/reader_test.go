package plan

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestProposedFirst(t *testing.T) {
	live := &clusterv1.ClusterClass{}
	live.SetNamespace(ns)
	live.SetName("local")
	live.Spec.Infrastructure.TemplateRef = clusterv1.ClusterClassTemplateReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1alpha1", Kind: "CrossplaneClusterTemplate", Name: "old"}
	proposed := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"infrastructure": map[string]any{"templateRef": map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "CrossplaneClusterTemplate", "name": "new"}}}}}
	proposed.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("ClusterClass"))
	proposed.SetNamespace(ns)
	proposed.SetName("local")
	r := proposedFirst{
		Client:   fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(live).Build(),
		proposed: map[schema.GroupKind]map[client.ObjectKey]*unstructured.Unstructured{proposed.GroupVersionKind().GroupKind(): {client.ObjectKeyFromObject(proposed): proposed}},
	}
	cases := map[string]struct {
		reason string
		obj    func() (client.Object, func() string)
	}{
		"Typed": {
			reason: "A typed object new from its type, as CAPI's generator reads, is the proposed one.",
			obj: func() (client.Object, func() string) {
				c := &clusterv1.ClusterClass{}
				return c, func() string { return c.Spec.Infrastructure.TemplateRef.Name }
			},
		},
		"Unstructured": {
			reason: "An unstructured object is the proposed one.",
			obj: func() (client.Object, func() string) {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("ClusterClass"))
				return u, func() string {
					n, _, _ := unstructured.NestedString(u.Object, "spec", "infrastructure", "templateRef", "name")
					return n
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj, templateName := tc.obj()
			if err := r.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "local"}, obj); err != nil {
				t.Fatal(err)
			}
			if got := templateName(); got != "new" {
				t.Errorf("%s\nread the template %q, want the proposed class's \"new\"", tc.reason, got)
			}
		})
	}
}

// A list holds the proposed form of each listed object the change holds,
// as the in-place update hooks read a MachineSet's XRs.
func TestProposedFirstList(t *testing.T) {
	live := func(name string) *clusterv1.ClusterClass {
		c := &clusterv1.ClusterClass{}
		c.SetNamespace(ns)
		c.SetName(name)
		c.Spec.Infrastructure.TemplateRef = clusterv1.ClusterClassTemplateReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1alpha1", Kind: "CrossplaneClusterTemplate", Name: "old"}
		return c
	}
	proposed := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"infrastructure": map[string]any{"templateRef": map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "CrossplaneClusterTemplate", "name": "new"}}}}}
	proposed.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("ClusterClass"))
	proposed.SetNamespace(ns)
	proposed.SetName("edited")
	created := proposed.DeepCopy()
	created.SetName("created")
	r := proposedFirst{
		Client: fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(live("edited"), live("kept")).Build(),
		proposed: map[schema.GroupKind]map[client.ObjectKey]*unstructured.Unstructured{proposed.GroupVersionKind().GroupKind(): {
			client.ObjectKeyFromObject(proposed): proposed, client.ObjectKeyFromObject(created): created}},
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("ClusterClassList"))
	if err := r.List(context.Background(), l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, u := range l.Items {
		got[u.GetName()], _, _ = unstructured.NestedString(u.Object, "spec", "infrastructure", "templateRef", "name")
	}
	want := map[string]string{"edited": "new", "kept": "old"}
	if len(got) != len(want) || got["edited"] != want["edited"] || got["kept"] != want["kept"] {
		t.Errorf("listed %v, want %v: the proposed form of what exists, nothing the change creates", got, want)
	}
}
