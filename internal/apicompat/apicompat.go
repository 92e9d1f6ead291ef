// Package apicompat finds the changes to a served API version that break
// its users on upgrade: a version no longer served, a field removed or
// retyped, a field newly required, an enum value or a range taken away, a
// kind's names or scope changed. It reads CRDs and Crossplane XRDs alike;
// docs/decisions.md ("What an upgrade never changes") says why each is
// refused. Additions are compatible: new versions, new optional fields,
// new enum values, wider ranges.
package apicompat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// API is what a CRD or an XRD serves: its group, kind and names, scope, and
// each version's schema and whether it is served.
type API struct {
	Source   string
	Group    string
	Kind     string
	Plural   string
	Scope    string
	Versions map[string]Version
}

// Version is one version of an API.
type Version struct {
	Served bool
	Schema *extv1.JSONSchemaProps
}

// Read reads a CRD or an XRD.
func Read(source string, b []byte) (API, error) {
	var tm struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(b, &tm); err != nil {
		return API{}, errors.Wrapf(err, "%s: cannot decode", source)
	}
	a := API{Source: source, Versions: map[string]Version{}}
	switch tm.Kind {
	case "CustomResourceDefinition":
		crd := &extv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(b, crd); err != nil {
			return API{}, errors.Wrapf(err, "%s: cannot decode the CRD", source)
		}
		a.Group, a.Kind, a.Plural, a.Scope = crd.Spec.Group, crd.Spec.Names.Kind, crd.Spec.Names.Plural, string(crd.Spec.Scope)
		for _, v := range crd.Spec.Versions {
			var s *extv1.JSONSchemaProps
			if v.Schema != nil {
				s = v.Schema.OpenAPIV3Schema
			}
			a.Versions[v.Name] = Version{Served: v.Served, Schema: s}
		}
	case "CompositeResourceDefinition":
		xrd := &xpextv2.CompositeResourceDefinition{}
		if err := yaml.Unmarshal(b, xrd); err != nil {
			return API{}, errors.Wrapf(err, "%s: cannot decode the XRD", source)
		}
		a.Group, a.Kind, a.Plural, a.Scope = xrd.Spec.Group, xrd.Spec.Names.Kind, xrd.Spec.Names.Plural, string(xrd.Spec.Scope)
		for _, v := range xrd.Spec.Versions {
			var s *extv1.JSONSchemaProps
			if v.Schema != nil && len(v.Schema.OpenAPIV3Schema.Raw) > 0 {
				s = &extv1.JSONSchemaProps{}
				if err := json.Unmarshal(v.Schema.OpenAPIV3Schema.Raw, s); err != nil {
					return API{}, errors.Wrapf(err, "%s: cannot decode the schema of version %s", source, v.Name)
				}
			}
			a.Versions[v.Name] = Version{Served: v.Served, Schema: s}
		}
	default:
		return API{}, errors.Errorf("%s: a %q is neither a CustomResourceDefinition nor a CompositeResourceDefinition", source, tm.Kind)
	}
	return a, nil
}

// Breaking lists what in next breaks a user of prev: each a sentence naming
// the kind, the version and the field.
func Breaking(prev, next API) []string {
	var out []string
	add := func(format string, args ...any) {
		out = append(out, fmt.Sprintf("%s %s: ", prev.Kind, prev.Group)+fmt.Sprintf(format, args...))
	}
	if next.Group != prev.Group || next.Kind != prev.Kind || next.Plural != prev.Plural {
		add("renamed to %s %s (plural %q, was %q)", next.Kind, next.Group, next.Plural, prev.Plural)
	}
	if next.Scope != prev.Scope {
		add("scope changed from %q to %q", prev.Scope, next.Scope)
	}
	versions := make([]string, 0, len(prev.Versions))
	for v := range prev.Versions {
		versions = append(versions, v)
	}
	sort.Strings(versions)
	for _, name := range versions {
		pv := prev.Versions[name]
		if !pv.Served {
			continue
		}
		nv, ok := next.Versions[name]
		switch {
		case !ok:
			add("version %s removed while served", name)
			continue
		case !nv.Served:
			add("version %s no longer served", name)
			continue
		}
		for _, s := range schemaBreaks(pv.Schema, nv.Schema, "") {
			add("%s: %s", name, s)
		}
	}
	return out
}

// schemaBreaks compares two schemas of the same field.
func schemaBreaks(prev, next *extv1.JSONSchemaProps, path string) []string {
	if prev == nil {
		return nil
	}
	at := path
	if at == "" {
		at = "the schema"
	}
	if next == nil {
		return []string{at + " lost its schema"}
	}
	var out []string
	add := func(format string, args ...any) { out = append(out, at+": "+fmt.Sprintf(format, args...)) }
	if prev.Type != "" && next.Type != prev.Type {
		add("type %q became %q", prev.Type, next.Type)
	}
	if prev.XPreserveUnknownFields != nil && *prev.XPreserveUnknownFields &&
		(next.XPreserveUnknownFields == nil || !*next.XPreserveUnknownFields) {
		add("no longer preserves unknown fields")
	}
	for _, r := range next.Required {
		if !slices.Contains(prev.Required, r) {
			add("%q became required", r)
		}
	}
	// No enum at all accepts every value.
	if len(prev.Enum) > 0 && len(next.Enum) > 0 {
		for _, v := range prev.Enum {
			if !slices.ContainsFunc(next.Enum, func(n extv1.JSON) bool { return bytes.Equal(n.Raw, v.Raw) }) {
				add("enum value %s removed", v.Raw)
			}
		}
	}
	for _, b := range []string{
		narrowed("maxLength", prev.MaxLength, next.MaxLength, true),
		narrowed("maxItems", prev.MaxItems, next.MaxItems, true),
		narrowed("maxProperties", prev.MaxProperties, next.MaxProperties, true),
		narrowed("minLength", prev.MinLength, next.MinLength, false),
		narrowed("minItems", prev.MinItems, next.MinItems, false),
		narrowed("minProperties", prev.MinProperties, next.MinProperties, false),
		narrowed("maximum", prev.Maximum, next.Maximum, true),
		narrowed("minimum", prev.Minimum, next.Minimum, false),
	} {
		if b != "" {
			add("%s", b)
		}
	}
	if next.Pattern != prev.Pattern && next.Pattern != "" {
		add("pattern %q became %q", prev.Pattern, next.Pattern)
	}
	names := make([]string, 0, len(prev.Properties))
	for n := range prev.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := prev.Properties[n]
		np, ok := next.Properties[n]
		if !ok {
			if next.XPreserveUnknownFields != nil && *next.XPreserveUnknownFields {
				continue // still accepted, unvalidated
			}
			out = append(out, join(path, n)+" removed")
			continue
		}
		out = append(out, schemaBreaks(&p, &np, join(path, n))...)
	}
	if prev.Items != nil && prev.Items.Schema != nil {
		var ni *extv1.JSONSchemaProps
		if next.Items != nil {
			ni = next.Items.Schema
		}
		out = append(out, schemaBreaks(prev.Items.Schema, ni, path+"[]")...)
	}
	if prev.AdditionalProperties != nil && prev.AdditionalProperties.Schema != nil {
		var na *extv1.JSONSchemaProps
		if next.AdditionalProperties != nil {
			na = next.AdditionalProperties.Schema
		}
		out = append(out, schemaBreaks(prev.AdditionalProperties.Schema, na, path+"{}")...)
	}
	return out
}

// narrowed says how a bound (an upper one, or a lower one) admits less
// than before: added where there was none, or moved inward; empty when
// not.
func narrowed[T int64 | float64](what string, prev, next *T, upper bool) string {
	switch {
	case next == nil:
		return ""
	case prev == nil:
		return fmt.Sprintf("%s %v added", what, *next)
	case upper && *next < *prev, !upper && *next > *prev:
		return fmt.Sprintf("%s %v became %v", what, *prev, *next)
	}
	return ""
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return strings.Join([]string{path, name}, ".")
}
