package outputs

import (
	"fmt"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Missing reports whether errs say only that the composition has not reported
// a contract output yet (the control plane endpoint, the provider ID), as
// opposed to reporting one that is malformed.
func Missing(errs field.ErrorList) bool {
	if len(errs) == 0 {
		return false
	}
	for _, e := range errs {
		if e.Type != field.ErrorTypeRequired || !missable[e.Field] {
			return false
		}
	}
	return true
}

// missable are the outputs a composition reports once it has them.
var missable = map[string]bool{
	outputEndpoint.String():       true,
	outputProviderID.String():     true,
	outputVersion.String():        true,
	outputKubeconfig.String():     true,
	outputProviderIDList.String(): true,
}

// reported is a contract value that both spec and the composition's
// outputs can hold: the endpoint of an InfraCluster, the provider ID of an
// InfraMachine.
type reported[T comparable] struct {
	specPath, outPath *field.Path
	// read reads the value at one of them, with its field errors.
	read func(*fieldpath.Paved, *field.Path) (T, field.ErrorList)
	// show renders a value for a message and for field.Invalid.
	show func(T) string
	// what names the value in the error saying it was not reported.
	what string
}

// settle reads both and resolves the value spec must hold: spec's, once the
// user or the bridge set it, else the one the composition reported. Either
// malformed is its field errors; neither set is Required; outputs that
// disagree with spec are Invalid, since spec is immutable once set.
func (r reported[T]) settle(p *fieldpath.Paved) (T, field.ErrorList) {
	var zero T
	spec, errs := r.read(p, r.specPath)
	out, outErrs := r.read(p, r.outPath)
	switch errs = append(errs, outErrs...); {
	case len(errs) > 0:
		return zero, errs
	case out == zero && spec == zero:
		return zero, field.ErrorList{field.Required(r.outPath, fmt.Sprintf("the composition has not reported %s", r.what))}
	case out == zero:
		return spec, nil
	case spec != zero && spec != out:
		return zero, field.ErrorList{field.Invalid(r.outPath, r.show(out),
			fmt.Sprintf("differs from %s %q, which is immutable once set", r.specPath, r.show(spec)))}
	default:
		return out, nil
	}
}
