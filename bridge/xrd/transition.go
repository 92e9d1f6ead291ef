package xrd

import (
	"regexp"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// oldSelf finds the CEL variable a transition rule compares with.
var oldSelf = regexp.MustCompile(`\boldSelf\b`)

// WithoutTransitionRules removes, throughout a schema, the validation rules
// that compare an object with its stored self (those naming oldSelf).
//
// A template embeds the schema of what it stamps out, whose transition rules
// guard that object's own updates (an XR's parameters are immutable, say).
// In a template they would guard the template's updates instead, and a
// template's updates are the template immutability policy's to judge:
// CAPI's topology controller must be able to dry-run a changed template
// (see TemplateResource), which a CEL rule cannot tell from a change.
func WithoutTransitionRules(s *extv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	kept := s.XValidations[:0]
	for _, r := range s.XValidations {
		if !oldSelf.MatchString(r.Rule) && !oldSelf.MatchString(r.MessageExpression) {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		kept = nil
	}
	s.XValidations = kept
	for _, m := range []map[string]extv1.JSONSchemaProps{s.Properties, s.PatternProperties, s.Definitions} {
		for k := range m {
			p := m[k]
			WithoutTransitionRules(&p)
			m[k] = p
		}
	}
	for _, l := range [][]extv1.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range l {
			WithoutTransitionRules(&l[i])
		}
	}
	WithoutTransitionRules(s.Not)
	if s.Items != nil {
		WithoutTransitionRules(s.Items.Schema)
		for i := range s.Items.JSONSchemas {
			WithoutTransitionRules(&s.Items.JSONSchemas[i])
		}
	}
	for _, o := range []*extv1.JSONSchemaPropsOrBool{s.AdditionalProperties, s.AdditionalItems} {
		if o != nil {
			WithoutTransitionRules(o.Schema)
		}
	}
	for k, d := range s.Dependencies {
		WithoutTransitionRules(d.Schema)
		s.Dependencies[k] = d
	}
}
