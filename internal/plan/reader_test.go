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
