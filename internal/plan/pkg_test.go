package plan

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestReplacing(t *testing.T) {
	comp := func(labels map[string]string, spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetAPIVersion("apiextensions.crossplane.io/v1")
		u.SetKind("Composition")
		u.SetName("local")
		u.SetLabels(labels)
		return u
	}
	cases := map[string]struct {
		reason string
		live   *unstructured.Unstructured
		pkg    *unstructured.Unstructured
	}{
		"DroppedLabelAndField": {
			reason: "A label and a field the package's version drops are dropped, as the package manager's replacement drops them.",
			live:   comp(map[string]string{"capxp.dev/backend": "local", "old": "yes"}, map[string]any{"mode": "Pipeline", "writeConnectionSecretsToNamespace": "x"}),
			pkg:    comp(map[string]string{"capxp.dev/backend": "local"}, map[string]any{"mode": "Pipeline"}),
		},
		"Changed": {
			reason: "A changed field is the package's.",
			live:   comp(nil, map[string]any{"pipeline": []any{map[string]any{"step": "a"}}}),
			pkg:    comp(nil, map[string]any{"pipeline": []any{map[string]any{"step": "b"}}}),
		},
		"New": {
			reason: "A Composition that does not exist yet is created as it is.",
			pkg:    comp(map[string]string{"a": "b"}, map[string]any{"mode": "Pipeline"}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(Scheme())
			if tc.live != nil {
				b = b.WithObjects(tc.live.DeepCopy())
			}
			c := b.Build()
			got, err := Replacing(context.Background(), c, []*unstructured.Unstructured{tc.pkg})
			if err != nil {
				t.Fatal(err)
			}
			if tc.live == nil {
				if diff := cmp.Diff(tc.pkg, got[0]); diff != "" {
					t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
				}
				return
			}
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(tc.pkg.GroupVersionKind())
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(tc.pkg), live); err != nil {
				t.Fatal(err)
			}
			if _, err := merge(live, got[0]); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.pkg.Object["spec"], live.Object["spec"]); diff != "" {
				t.Errorf("%s\nspec -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.pkg.GetLabels(), live.GetLabels()); diff != "" {
				t.Errorf("%s\nlabels -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
