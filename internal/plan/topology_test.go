package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"
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

func TestDropped(t *testing.T) {
	obj := func(labels map[string]any, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "t", "labels": labels}, "spec": spec}}
	}
	cases := map[string]struct {
		reason            string
		desired, previous *unstructured.Unstructured
		want              map[string]any
	}{
		"NothingDropped": {
			reason:  "What the controller set before and sets still is left as it is.",
			desired: obj(map[string]any{"a": "1"}, map[string]any{"size": "large"}), previous: obj(map[string]any{"a": "1"}, map[string]any{"size": "small"}),
			want: obj(map[string]any{"a": "1"}, map[string]any{"size": "large"}).Object,
		},
		"AFieldDropped": {
			reason:  "A field a disabled patch set is removed: null in the patch.",
			desired: obj(nil, map[string]any{"size": "small"}), previous: obj(nil, map[string]any{"size": "small", "rootVolume": map[string]any{"sizeGiB": int64(50)}}),
			want: obj(nil, map[string]any{"size": "small", "rootVolume": nil}).Object,
		},
		"ANestedFieldDropped": {
			reason:  "Only the field dropped goes, not its siblings.",
			desired: obj(nil, map[string]any{"network": map[string]any{"region": "a"}}), previous: obj(nil, map[string]any{"network": map[string]any{"region": "a", "vpc": "v"}}),
			want: obj(nil, map[string]any{"network": map[string]any{"region": "a", "vpc": nil}}).Object,
		},
		"ALabelDropped": {
			reason:  "A label the class no longer sets is removed.",
			desired: obj(map[string]any{"a": "1"}, map[string]any{}), previous: obj(map[string]any{"a": "1", "b": "2"}, map[string]any{}),
			want: obj(map[string]any{"a": "1", "b": nil}, map[string]any{}).Object,
		},
		"NoPrevious": {
			reason:  "Without what was applied before, the desired object is all there is.",
			desired: obj(nil, map[string]any{"size": "small"}),
			want:    obj(nil, map[string]any{"size": "small"}).Object,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := dropped(tc.desired, tc.previous)
			if diff := cmp.Diff(tc.want, got.Object); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
			// A field dropped from a template's spec rotates it.
			if tc.previous != nil && name == "AFieldDropped" && !rotates(tc.previous, got) {
				t.Errorf("%s\na template whose spec loses a field is not rotated", tc.reason)
			}
		})
	}
}
