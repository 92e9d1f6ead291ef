package inplace

import (
	"fmt"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// spec is where every declared field sits.
const spec = "spec"

// maxFields bounds a declaration: a Composition lists a handful of fields.
const maxFields = 64

// never are the fields of a machine XR's spec that never change in place,
// whatever a Composition declares, and why.
var never = []struct {
	path []string
	why  string
}{
	{[]string{spec, "providerConfigRef"}, "a machine moves to other credentials only by being replaced, and judged as a new machine"},
	{[]string{spec, "crossplane"}, "it selects the Composition or the revision that composes the machine"},
	{[]string{spec, "providerID"}, "it is the machine's identity"},
	{[]string{spec, "bootstrap"}, "the bridge writes it from the Machine"},
	{[]string{spec, "network"}, "the bridge writes it from the cluster"},
	{[]string{spec, "failureDomain"}, "the bridge writes it from the Machine"},
}

// Fields are the XR fields a Composition revision declares its composed
// resources take on a running machine. The zero Fields declares none.
type Fields struct {
	paths [][]string
}

// Declared reads the fields a Composition or CompositionRevision declares
// in its capxp.dev/in-place-fields annotation: comma-separated paths of the
// XR's spec, each covering everything below it. A missing or empty
// annotation declares none. A malformed one is an error naming the path,
// and declares none.
func Declared(annotations map[string]string) (Fields, error) {
	return declared(infrav1.InPlaceFieldsAnnotation, annotations, "the XR's spec (spec.parameters.size, say)", true)
}

// DeclaredBootstrap reads the fields of a Machine's bootstrap config spec a
// Composition or CompositionRevision declares its hosts apply on a running
// machine, in its capxp.dev/in-place-bootstrap-fields annotation: paths as
// Declared's, of the bootstrap config's spec (a KubeadmConfig's, or what a
// KubeadmConfigTemplate stamps).
func DeclaredBootstrap(annotations map[string]string) (Fields, error) {
	return declared(infrav1.InPlaceBootstrapFieldsAnnotation, annotations, "the bootstrap config's spec (spec.files, say)", false)
}

// declared parses the paths an annotation lists. of says whose spec they
// are; xr applies the fields of a machine XR's spec that never change in
// place.
func declared(annotation string, annotations map[string]string, of string, xr bool) (Fields, error) {
	raw := strings.TrimSpace(annotations[annotation])
	if raw == "" {
		return Fields{}, nil
	}
	parts := strings.Split(raw, ",")
	if len(parts) > maxFields {
		return Fields{}, errors.Errorf("%s lists %d fields, more than %d", annotation, len(parts), maxFields)
	}
	var f Fields
	for _, p := range parts {
		p = strings.TrimSpace(p)
		segs, err := segments(p)
		if err != nil {
			return Fields{}, errors.Wrapf(err, "%s: %q", annotation, p)
		}
		if len(segs) < 2 || segs[0] != spec {
			return Fields{}, errors.Errorf("%s: %q is not a field of %s", annotation, p, of)
		}
		for _, n := range never {
			if xr && (within(segs, n.path) || within(n.path, segs)) {
				return Fields{}, errors.Errorf("%s: %s never changes in place: %s", annotation, p, n.why)
			}
		}
		f.paths = append(f.paths, segs)
	}
	return f, nil
}

// Paths returns the declared paths, as written.
func (f Fields) Paths() []string {
	out := make([]string, 0, len(f.paths))
	for _, p := range f.paths {
		out = append(out, strings.Join(p, "."))
	}
	return out
}

// covers reports whether a changed field is within a declared one.
func (f Fields) covers(path []string) bool {
	return slices.ContainsFunc(f.paths, func(d []string) bool { return within(path, d) })
}

// segments parses a dotted field path of plain names: no list indexes,
// since a list changes as a whole.
func segments(p string) ([]string, error) {
	if p == "" {
		return nil, errors.New("empty path")
	}
	segs, err := fieldpath.Parse(p)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(segs))
	for _, s := range segs {
		if s.Type != fieldpath.SegmentField || s.Field == "" {
			return nil, errors.New("a path names fields only, not list elements")
		}
		out = append(out, s.Field)
	}
	return out, nil
}

// within reports whether path is prefix or below it.
func within(path, prefix []string) bool {
	return len(path) >= len(prefix) && slices.Equal(path[:len(prefix)], prefix)
}

// neverWhy says why a changed field never changes in place; "" when it may.
func neverWhy(path []string) string {
	for _, n := range never {
		if within(path, n.path) {
			return fmt.Sprintf("%s never changes in place: %s", strings.Join(path, "."), n.why)
		}
	}
	return ""
}
