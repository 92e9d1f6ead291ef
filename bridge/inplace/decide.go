package inplace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// A Revision is the CompositionRevision a running machine is pinned to,
// and what it declares: the XR's fields its composed resources take in
// place, and the bootstrap config's fields its hosts apply. Err is why its
// declarations could not be read (malformed, or the revision not found);
// such a revision covers nothing.
type Revision struct {
	Name      string
	Fields    Fields
	Bootstrap Fields
	Err       error
}

// A Decision says which of a machine's changed fields it takes in place
// and why each of the others would replace it.
type Decision struct {
	// Changed lists every field of the spec that changes, as paths.
	Changed []string
	// InPlace lists the changed fields every running machine takes in
	// place.
	InPlace []string
	// Refused says, for each changed field that is not taken in place,
	// why not.
	Refused []string
}

// Updatable reports whether the whole change is taken in place: something
// changes, and nothing is refused. A change of nothing is CAPI's to judge:
// it compares the rest of the Machine itself.
func (d Decision) Updatable() bool {
	return len(d.Refused) == 0
}

// Decide judges a change of a machine XR's spec, from current to desired
// (each the spec map: an XR's spec, or a template's spec.template.spec),
// against the revisions its running machines are pinned to: a field is
// taken in place when it is none of the fields that never change in place
// and every revision declares it.
func Decide(current, desired map[string]any, revisions []Revision) Decision {
	return decide(current, desired, revisions, func(r Revision) Fields { return r.Fields }, infrav1.InPlaceFieldsAnnotation, true)
}

// DecideBootstrap judges a change of a machine's bootstrap config spec
// (a KubeadmConfig's spec, or a template's spec.template.spec) against the
// revisions its running machines are pinned to: a field is taken in place
// when every revision declares its hosts apply it.
func DecideBootstrap(current, desired map[string]any, revisions []Revision) Decision {
	return decide(current, desired, revisions, func(r Revision) Fields { return r.Bootstrap }, infrav1.InPlaceBootstrapFieldsAnnotation, false)
}

// decide judges each changed field by what every revision declares in
// annotation (declared picks it); xr applies the XR fields that never
// change in place.
func decide(current, desired map[string]any, revisions []Revision, declared func(Revision) Fields, annotation string, xr bool) Decision {
	var d Decision
	for _, path := range Changes(current, desired) {
		name := strings.Join(path, ".")
		d.Changed = append(d.Changed, name)
		if why := neverWhy(path); xr && why != "" {
			d.Refused = append(d.Refused, why)
			continue
		}
		if why := uncovered(path, revisions, declared, annotation); why != "" {
			d.Refused = append(d.Refused, why)
			continue
		}
		d.InPlace = append(d.InPlace, name)
	}
	return d
}

// uncovered says which revision does not declare a changed field; "" when
// all do.
func uncovered(path []string, revisions []Revision, declared func(Revision) Fields, annotation string) string {
	name := strings.Join(path, ".")
	if len(revisions) == 0 {
		return fmt.Sprintf("%s: no running machine's Composition revision is known", name)
	}
	for _, r := range revisions {
		switch {
		case r.Err != nil:
			return fmt.Sprintf("%s: CompositionRevision %s: %v", name, r.Name, r.Err)
		case !declared(r).covers(path):
			return fmt.Sprintf("%s: CompositionRevision %s does not declare it in place (%s)", name, r.Name, annotation)
		}
	}
	return ""
}

// Changes lists the fields of two specs whose values differ, each as a path
// starting at "spec": the deepest objects that differ, with lists and
// scalars compared whole. Paths are sorted.
func Changes(current, desired map[string]any) [][]string {
	var out [][]string
	diff([]string{spec}, current, desired, &out)
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(strings.Join(a, "."), strings.Join(b, ".")) })
	return out
}

func diff(at []string, a, b map[string]any, out *[][]string) {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		av, aok := a[k]
		bv, bok := b[k]
		path := append(slices.Clip(at), k)
		am, aIsMap := av.(map[string]any)
		bm, bIsMap := bv.(map[string]any)
		switch {
		case aok && bok && aIsMap && bIsMap:
			diff(path, am, bm, out)
		case aok != bok || !equal(av, bv):
			*out = append(*out, path)
		}
	}
}

// equal compares two JSON values, numbers by value whatever their Go type
// (an int64 from the API server's decoder, a float64 from encoding/json).
func equal(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// MergePatch returns the JSON merge patch that sets each of the given
// fields of an object to its value in desired (the spec map), or removes
// it where desired has none. at is where the spec sits in the object
// patched: ["spec"] for an XR, ["spec", "template", "spec"] for a
// template. The fields are paths from Decide, starting at "spec".
func MergePatch(at []string, desired map[string]any, fields []string) ([]byte, error) {
	root := map[string]any{}
	for _, f := range fields {
		path := strings.Split(f, ".")
		if len(path) < 2 || path[0] != spec {
			return nil, errors.Errorf("%q is not a field of the spec", f)
		}
		value, found := lookup(desired, path[1:])
		if !found {
			value = nil
		}
		node := root
		full := append(slices.Clip(at), path[1:]...)
		for _, seg := range full[:len(full)-1] {
			next, ok := node[seg].(map[string]any)
			if !ok {
				next = map[string]any{}
				node[seg] = next
			}
			node = next
		}
		node[full[len(full)-1]] = value
	}
	return json.Marshal(root)
}

func lookup(m map[string]any, path []string) (any, bool) {
	var cur any = m
	for _, seg := range path {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[seg]; !ok {
			return nil, false
		}
	}
	return cur, true
}
