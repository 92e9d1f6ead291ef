package compcheck

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/inplace"
	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/internal/render"
)

// FieldInPlace is the verdict on what a machine Composition declares its
// composed resources take in place.
const FieldInPlace = "in-place fields"

// FieldInPlaceBootstrap is the verdict on what a machine Composition
// declares its hosts apply of a bootstrap config's change.
const FieldInPlaceBootstrap = "in-place bootstrap fields"

// inPlaceBootstrap judges an InfraMachine Composition's
// capxp.dev/in-place-bootstrap-fields: well formed. What a host applies on
// a running machine is not something a render shows; the declaration is
// its author's word, and the verdict says so.
func inPlaceBootstrap(in Input) Verdict {
	f, err := inplace.DeclaredBootstrap(in.Composition.GetAnnotations())
	switch {
	case err != nil:
		return Verdict{Field: FieldInPlaceBootstrap, Reason: err.Error()}
	case len(f.Paths()) == 0:
		return Verdict{Field: FieldInPlaceBootstrap, OK: true, Reason: fmt.Sprintf("none declared (%s): every change of a machine's bootstrap config replaces it", infrav1.InPlaceBootstrapFieldsAnnotation)}
	}
	return Verdict{Field: FieldInPlaceBootstrap, OK: true, Reason: strings.Join(f.Paths(), ", ") + " of the bootstrap config, which the Composition's hosts apply on a running machine (declared, not rendered)"}
}

// inPlace judges an InfraMachine Composition's capxp.dev/in-place-fields:
// well formed, each path in the XRD's schema, and, for each path the
// example XR sets, a change of its value renders the same composed
// resources (none added or removed, none of another kind or name), changed
// in place. An object's change is tried on its first field alone, and a
// path the example does not set on the schema alone. r is the check of the
// XR as it stands.
func inPlace(ctx context.Context, e *render.Engine, in Input, r *Result) Verdict {
	f, err := inplace.Declared(in.Composition.GetAnnotations())
	switch {
	case err != nil:
		return Verdict{Field: FieldInPlace, Reason: err.Error()}
	case len(f.Paths()) == 0:
		return Verdict{Field: FieldInPlace, OK: true, Reason: fmt.Sprintf("none declared (%s): every change of a machine's parameters replaces it", infrav1.InPlaceFieldsAnnotation)}
	case r.Err != nil || r.Last == nil:
		return Verdict{Field: FieldInPlace, Reason: "not judged: the Composition does not render"}
	}
	var said []string
	for _, p := range f.Paths() {
		segs := strings.Split(p, ".")
		if !inSchema(in.XRD, segs) {
			return Verdict{Field: FieldInPlace, Reason: fmt.Sprintf("%s is not a field of the XRD's schema", p)}
		}
		v, found, _ := unstructured.NestedFieldCopy(r.XR.Object, segs...)
		if !found {
			said = append(said, p+" (not set in the example: schema checked only)")
			continue
		}
		xr := r.XR.DeepCopy()
		_ = unstructured.SetNestedField(xr.Object, changed(v), segs...)
		out, err := e.Render(ctx, render.Input{XR: xr, Composition: in.Composition, XRD: in.XRD, Observed: r.Observed, Extra: []*unstructured.Unstructured{BootstrapSecret(in.XR)}})
		if out == nil || err != nil {
			return Verdict{Field: FieldInPlace, Reason: fmt.Sprintf("%s changed: the Composition does not render: %v", p, err)}
		}
		before, after := byResourceName(r.Last.Composed), byResourceName(out.Composed)
		if !slices.Equal(sortedKeys(before), sortedKeys(after)) {
			return Verdict{Field: FieldInPlace, Reason: fmt.Sprintf("%s changed: composes %v instead of %v: a resource added or removed is not a change in place", p, sortedKeys(after), sortedKeys(before))}
		}
		var reaches []string
		for _, name := range sortedKeys(before) {
			b, a := before[name], after[name]
			if b.GetAPIVersion() != a.GetAPIVersion() || b.GetKind() != a.GetKind() || b.GetName() != a.GetName() {
				return Verdict{Field: FieldInPlace, Reason: fmt.Sprintf("%s changed: resource %s becomes %s %s, was %s %s: a new resource is not a change in place", p, name, a.GetKind(), a.GetName(), b.GetKind(), b.GetName())}
			}
			if !reflect.DeepEqual(before[name].Object["spec"], after[name].Object["spec"]) {
				reaches = append(reaches, before[name].GetKind()+" "+name)
			}
		}
		if len(reaches) == 0 {
			said = append(said, p+" (changes no composed resource)")
			continue
		}
		said = append(said, p+" (changes "+strings.Join(reaches, ", ")+")")
	}
	return Verdict{Field: FieldInPlace, OK: true, Reason: strings.Join(said, "; ")}
}

// inSchema reports whether a path of plain field names is a field of the
// XRD's schema, in every version: an object that preserves unknown fields
// holds any path below it.
func inSchema(xrd *unstructured.Unstructured, path []string) bool {
	versions, _, _ := unstructured.NestedSlice(xrd.Object, "spec", "versions")
	if len(versions) == 0 {
		return false
	}
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		s, _, _ := unstructured.NestedMap(vm, "schema", "openAPIV3Schema")
		if !schemaHas(s, path) {
			return false
		}
	}
	return true
}

func schemaHas(s map[string]any, path []string) bool {
	for _, seg := range path {
		if s == nil {
			return false
		}
		if keep, _ := s["x-kubernetes-preserve-unknown-fields"].(bool); keep {
			return true
		}
		next, ok, _ := unstructured.NestedMap(s, "properties", seg)
		if !ok {
			return false
		}
		s = next
	}
	return true
}

// changed returns a different value of the same kind: a changed string,
// number or flag, or an object with its first field so changed.
func changed(v any) any {
	switch x := v.(type) {
	case string:
		return x + "-changed"
	case int64:
		return x + 1
	case float64:
		return x + 1
	case bool:
		return !x
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			out[k] = val
		}
		keys := sortedKeys(x)
		if len(keys) > 0 {
			out[keys[0]] = changed(x[keys[0]])
		}
		return out
	case []any:
		return append(slices.Clone(x), x...)
	}
	return v
}

func byResourceName(composed []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, c := range composed {
		out[c.GetAnnotations()[compositions.AnnotationResourceName]] = c
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
