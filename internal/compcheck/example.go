package compcheck

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// notGenerated are the spec fields an example leaves out: Crossplane's own,
// and what the bridge copies from the Composition's outputs (an example
// that set them would disagree with the outputs).
var notGenerated = []string{"crossplane", "providerID", "controlPlaneEndpoint"}

// ExampleFromXRD is an example XR of the Composition's composite kind,
// generated from the served version of its XRD's schema: every field of
// spec set (but notGenerated), to its default, its enum's first value, or a
// placeholder within its bounds; one item per list, at least minItems. It
// is a starting point: a real example (--xr) checks what users will send.
func ExampleFromXRD(xrd, comp *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	// The XRD's versions carry their schema as a CRD's do.
	var spec struct {
		Group    string `json:"group"`
		Scope    string `json:"scope"`
		Versions []struct {
			Name   string `json:"name"`
			Served bool   `json:"served"`
			Schema struct {
				OpenAPIV3Schema extv1.JSONSchemaProps `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	}
	raw, _, _ := unstructured.NestedMap(xrd.Object, "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		return nil, errors.Wrapf(err, "XRD %s: cannot read its versions", xrd.GetName())
	}
	apiVersion, _, _ := unstructured.NestedString(comp.Object, "spec", "compositeTypeRef", "apiVersion")
	kind, _, _ := unstructured.NestedString(comp.Object, "spec", "compositeTypeRef", "kind")
	for i := range spec.Versions {
		v := &spec.Versions[i]
		if spec.Group+"/"+v.Name != apiVersion {
			continue
		}
		s, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
		if !ok {
			return nil, errors.Errorf("XRD %s version %s has no spec in its schema", xrd.GetName(), v.Name)
		}
		xr := &unstructured.Unstructured{Object: map[string]any{"spec": generate(s, "spec", 0)}}
		if _, found, _ := unstructured.NestedMap(xr.Object, "spec", "providerConfigRef"); found {
			// Credentials of the provider of what the Composition composes.
			if g := providerGroup(comp); g != "" {
				_ = unstructured.SetNestedField(xr.Object, g, "spec", "providerConfigRef", "apiGroup")
			}
		}
		xr.SetAPIVersion(apiVersion)
		xr.SetKind(kind)
		xr.SetName("example")
		if spec.Scope != "Cluster" {
			xr.SetNamespace("default")
		}
		return xr, nil
	}
	return nil, errors.Errorf("XRD %s serves no version %s for the Composition's compositeTypeRef", xrd.GetName(), apiVersion)
}

// generate is a value for a schema. name is the field's, idx the item's
// index in its list (values of list items differ).
func generate(s extv1.JSONSchemaProps, name string, idx int) any {
	if s.Default != nil && s.Type != "object" {
		if v, ok := fromJSON(s.Default.Raw); ok {
			return v
		}
	}
	if len(s.Enum) > 0 {
		if v, ok := fromJSON(s.Enum[0].Raw); ok {
			return v
		}
	}
	switch s.Type {
	case "object":
		out := map[string]any{}
		for k := range s.Properties {
			if name == "spec" && slices.Contains(notGenerated, k) {
				continue
			}
			out[k] = generate(s.Properties[k], k, idx)
		}
		// An object's default sets fields over the generated ones.
		if s.Default != nil {
			if d, ok := fromJSON(s.Default.Raw); ok {
				if dm, ok := d.(map[string]any); ok {
					for k, v := range dm {
						out[k] = v
					}
				}
			}
		}
		return out
	case "array":
		n := 1
		if s.MinItems != nil && int(*s.MinItems) > n {
			n = int(*s.MinItems)
		}
		items := make([]any, 0, n)
		for i := range n {
			if s.Items != nil && s.Items.Schema != nil {
				items = append(items, generate(*s.Items.Schema, name, i))
			}
		}
		return items
	case "integer", "number":
		v := int64(1)
		if s.Minimum != nil && int64(*s.Minimum) > v {
			v = int64(*s.Minimum)
		}
		return v
	case "boolean":
		return false
	case "string":
		return placeholder(s, name, idx)
	}
	return map[string]any{}
}

// placeholder is a string for a field, within its length bounds.
func placeholder(s extv1.JSONSchemaProps, name string, idx int) string {
	lower := strings.ToLower(name)
	v := fmt.Sprintf("example-%d", idx)
	switch {
	case strings.Contains(lower, "cidr"):
		v = fmt.Sprintf("10.%d.0.0/16", idx)
	case strings.Contains(lower, "region"):
		v = "region-1"
	case strings.Contains(lower, "failuredomain") || lower == "zone":
		v = fmt.Sprintf("zone-%c", 'a'+idx%26)
	}
	if s.MaxLength != nil && int64(len(v)) > *s.MaxLength {
		v = v[:*s.MaxLength]
	}
	for s.MinLength != nil && int64(len(v)) < *s.MinLength {
		v += "x"
	}
	return v
}

func fromJSON(raw []byte) (any, bool) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil || v == nil {
		return nil, false
	}
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return int64(f), true
	}
	return v, true
}

// providerGroup is the API group of the ProviderConfigs of the provider of
// the first managed resource the Composition composes:
// ec2.aws.m.upbound.io's are aws.m.upbound.io's, kubernetes.m.crossplane.io's
// its own.
func providerGroup(comp *unstructured.Unstructured) string {
	steps, _, _ := unstructured.NestedSlice(comp.Object, "spec", "pipeline")
	for _, st := range steps {
		m, _ := st.(map[string]any)
		res, _, _ := unstructured.NestedSlice(m, "input", "resources")
		for _, r := range res {
			rm, _ := r.(map[string]any)
			apiVersion, _, _ := unstructured.NestedString(rm, "base", "apiVersion")
			group, _, _ := strings.Cut(apiVersion, "/")
			if !strings.Contains(group, ".") {
				continue
			}
			if _, rest, _ := strings.Cut(group, "."); strings.Contains(rest, ".m.") && !strings.HasPrefix(rest, "m.") {
				return rest
			}
			return group
		}
	}
	return ""
}
