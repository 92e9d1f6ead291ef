package xrd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

func TestWithoutTransitionRules(t *testing.T) {
	transition := "self == oldSelf"
	kept := "self.size > 0"
	cases := map[string]struct {
		reason string
		in     extv1.JSONSchemaProps
		want   extv1.JSONSchemaProps
	}{
		"Root": {
			reason: "a rule naming oldSelf goes, any other stays",
			in:     withRules(extv1.JSONSchemaProps{Type: "object"}, kept, transition),
			want:   withRules(extv1.JSONSchemaProps{Type: "object"}, kept),
		},
		"OnlyTransitionRules": {
			reason: "no rules left is no rules, not an empty list",
			in:     withRules(extv1.JSONSchemaProps{Type: "object"}, transition),
			want:   extv1.JSONSchemaProps{Type: "object"},
		},
		"MessageExpression": {
			reason: "a rule whose message names oldSelf is a transition rule too",
			in: extv1.JSONSchemaProps{XValidations: extv1.ValidationRules{
				{Rule: "self.size > 0", MessageExpression: "'was ' + string(oldSelf.size)"},
			}},
			want: extv1.JSONSchemaProps{},
		},
		"SimilarName": {
			reason: "only the variable itself counts",
			in:     withRules(extv1.JSONSchemaProps{}, "has(self.oldSelfie)"),
			want:   withRules(extv1.JSONSchemaProps{}, "has(self.oldSelfie)"),
		},
		"Nested": {
			reason: "rules go throughout: properties, array items, map values and combinators",
			in: extv1.JSONSchemaProps{
				Properties: map[string]extv1.JSONSchemaProps{
					"a": withRules(extv1.JSONSchemaProps{Type: "string"}, transition),
					"list": {Type: "array", Items: &extv1.JSONSchemaPropsOrArray{
						Schema: ptr.To(withRules(extv1.JSONSchemaProps{Type: "object"}, transition, kept)),
					}},
					"map": {Type: "object", AdditionalProperties: &extv1.JSONSchemaPropsOrBool{
						Allows: true, Schema: ptr.To(withRules(extv1.JSONSchemaProps{Type: "string"}, transition)),
					}},
				},
				AllOf: []extv1.JSONSchemaProps{withRules(extv1.JSONSchemaProps{}, transition)},
			},
			want: extv1.JSONSchemaProps{
				Properties: map[string]extv1.JSONSchemaProps{
					"a": {Type: "string"},
					"list": {Type: "array", Items: &extv1.JSONSchemaPropsOrArray{
						Schema: ptr.To(withRules(extv1.JSONSchemaProps{Type: "object"}, kept)),
					}},
					"map": {Type: "object", AdditionalProperties: &extv1.JSONSchemaPropsOrBool{
						Allows: true, Schema: &extv1.JSONSchemaProps{Type: "string"},
					}},
				},
				AllOf: []extv1.JSONSchemaProps{{}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := *tc.in.DeepCopy()
			WithoutTransitionRules(&got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nWithoutTransitionRules(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
