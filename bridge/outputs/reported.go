package outputs

import (
	"fmt"

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
	spec, out         T
	specPath, outPath *field.Path
	// show renders a value for a message and for field.Invalid.
	show func(T) string
	// what names the value in the error saying it was not reported.
	what string
}

// settle resolves the value spec must hold: spec's, once the user or the
// bridge set it, else the one the composition reported. Neither set is
// Required; outputs that disagree with spec are Invalid, since spec is
// immutable once set.
func (r reported[T]) settle() (T, field.ErrorList) {
	var zero T
	switch {
	case r.out == zero && r.spec == zero:
		return zero, field.ErrorList{field.Required(r.outPath, fmt.Sprintf("the composition has not reported %s", r.what))}
	case r.out == zero:
		return r.spec, nil
	case r.spec != zero && r.spec != r.out:
		return zero, field.ErrorList{field.Invalid(r.outPath, r.show(r.out),
			fmt.Sprintf("differs from %s %q, which is immutable once set", r.specPath, r.show(r.spec)))}
	default:
		return r.out, nil
	}
}
