package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestStripManagedFields(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "crossplane", Operation: metav1.ManagedFieldsOperationApply}}
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "a", "managedFields": []any{map[string]any{"manager": "crossplane"}}}}}
	typed := &metav1.ObjectMeta{Name: "b", ManagedFields: managed}
	cases := map[string]struct {
		in    any
		check func(t *testing.T, out any)
	}{
		"Unstructured": {in: u, check: func(t *testing.T, out any) {
			t.Helper()
			if got := out.(*unstructured.Unstructured); got.GetManagedFields() != nil || got.GetName() != "a" {
				t.Errorf("managed fields %v, name %q", got.GetManagedFields(), got.GetName())
			}
		}},
		"Typed": {in: typed, check: func(t *testing.T, out any) {
			t.Helper()
			if got := out.(*metav1.ObjectMeta); got.ManagedFields != nil || got.Name != "b" {
				t.Errorf("managed fields %v, name %q", got.ManagedFields, got.Name)
			}
		}},
		"Other": {in: "tombstone", check: func(t *testing.T, out any) {
			t.Helper()
			if out != "tombstone" {
				t.Errorf("got %v", out)
			}
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := stripManagedFields(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, out)
		})
	}
}
