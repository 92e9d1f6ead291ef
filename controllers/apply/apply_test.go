package apply

import (
	"testing"
)

func TestHolds(t *testing.T) {
	cases := map[string]struct {
		reason     string
		live, want any
		holds      bool
	}{
		"Equal": {
			reason: "an object holds itself",
			live:   map[string]any{"spec": map[string]any{"a": "x", "n": int64(1)}},
			want:   map[string]any{"spec": map[string]any{"a": "x", "n": int64(1)}},
			holds:  true,
		},
		"DefaultsAdded": {
			reason: "fields the API server defaulted are not the bridge's",
			live:   map[string]any{"spec": map[string]any{"a": "x", "matchPolicy": "Equivalent"}, "metadata": map[string]any{"uid": "1"}},
			want:   map[string]any{"spec": map[string]any{"a": "x"}},
			holds:  true,
		},
		"NullSetsNothing": {
			reason: "a converted object's null creationTimestamp sets nothing",
			live:   map[string]any{"metadata": map[string]any{"name": "p"}},
			want:   map[string]any{"metadata": map[string]any{"name": "p", "creationTimestamp": nil}},
			holds:  true,
		},
		"ValueChanged": {
			reason: "someone changed a field the bridge sets",
			live:   map[string]any{"spec": map[string]any{"failurePolicy": "Ignore"}},
			want:   map[string]any{"spec": map[string]any{"failurePolicy": "Fail"}},
		},
		"FieldMissing": {
			reason: "a field the bridge sets was removed",
			live:   map[string]any{"spec": map[string]any{}},
			want:   map[string]any{"spec": map[string]any{"rules": []any{"a"}}},
		},
		"ListLonger": {
			reason: "a list the bridge sets gained an entry it did not set",
			live:   map[string]any{"rules": []any{"a", "b"}},
			want:   map[string]any{"rules": []any{"a"}},
		},
		"ListElementDefaulted": {
			reason: "list entries may carry defaults too",
			live:   map[string]any{"rules": []any{map[string]any{"name": "a", "scope": "*"}}},
			want:   map[string]any{"rules": []any{map[string]any{"name": "a"}}},
			holds:  true,
		},
		"TypeChanged": {
			reason: "a map where the bridge sets a string",
			live:   map[string]any{"spec": map[string]any{"a": map[string]any{}}},
			want:   map[string]any{"spec": map[string]any{"a": "x"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := holds(tc.live, tc.want); got != tc.holds {
				t.Errorf("%s: holds() = %t, want %t", tc.reason, got, tc.holds)
			}
		})
	}
}
