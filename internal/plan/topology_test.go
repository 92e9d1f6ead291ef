package plan

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestRotates(t *testing.T) {
	tmpl := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "t"}, "spec": spec}}
	}
	params := func(size string) map[string]any {
		return map[string]any{"template": map[string]any{"spec": map[string]any{"parameters": map[string]any{"size": size}}}}
	}
	cases := map[string]struct {
		reason           string
		current, desired *unstructured.Unstructured
		want             bool
	}{
		"Same": {
			reason:  "A template whose spec the class leaves as it is stays.",
			current: tmpl(params("small")), desired: tmpl(params("small")),
		},
		"ChangedField": {
			reason:  "A field the class sets to another value rotates the template.",
			current: tmpl(params("small")), desired: tmpl(params("large")),
			want: true,
		},
		"DefaultedField": {
			reason: "A field the API server defaulted, which the desired template does not set, is not a change.",
			current: tmpl(map[string]any{"template": map[string]any{"spec": map[string]any{
				"parameters": map[string]any{"size": "small", "rootVolume": map[string]any{"sizeGiB": int64(20)}}}}}),
			desired: tmpl(params("small")),
		},
		"NewField": {
			reason:  "A field the desired template adds is a change.",
			current: tmpl(params("small")),
			desired: tmpl(map[string]any{"template": map[string]any{"spec": map[string]any{"parameters": map[string]any{"size": "small", "image": "v2"}}}}),
			want:    true,
		},
		"NumbersOfEitherKind": {
			reason:  "A number read from JSON and one computed in Go are the same number.",
			current: tmpl(map[string]any{"replicas": float64(3)}), desired: tmpl(map[string]any{"replicas": int64(3)}),
		},
		"ListsWhole": {
			reason:  "A list is compared whole: one more item is a change.",
			current: tmpl(map[string]any{"zones": []any{"a"}}), desired: tmpl(map[string]any{"zones": []any{"a", "b"}}),
			want: true,
		},
		"MetadataOnly": {
			reason: "A change of the template's labels alone is patched in place, not rotated.",
			current: func() *unstructured.Unstructured {
				u := tmpl(params("small"))
				u.SetLabels(map[string]string{"a": "1"})
				return u
			}(),
			desired: func() *unstructured.Unstructured {
				u := tmpl(params("small"))
				u.SetLabels(map[string]string{"a": "2"})
				return u
			}(),
		},
		"NoCurrent": {
			reason:  "A template that does not exist yet is created, not rotated.",
			desired: tmpl(params("small")),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := rotates(tc.current, tc.desired); got != tc.want {
				t.Errorf("%s\nrotates: got %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}
