package outputs

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
)

// Field paths of the InfraMachinePool contract.
var (
	specReplicas         = field.NewPath("spec", "replicas")
	outputProviderIDList = field.NewPath("status", "outputs", "providerIDList")
)

// MachinePool is what the bridge maps from an InfraMachinePool XR.
type MachinePool struct {
	// ProviderIDList spec.providerIDList must hold: the pool's running
	// machines, in the order the composition reports them.
	ProviderIDList []string
}

// Replicas is how many machines the pool runs.
func (m MachinePool) Replicas() int64 { return int64(len(m.ProviderIDList)) }

// MapMachinePool reads status.outputs.providerIDList: every entry a
// provider ID, none twice. A pool asked for no machines may report none by
// leaving the list out; one asked for some must report the list, even
// empty, once it knows its machines.
func MapMachinePool(xr *unstructured.Unstructured) (MachinePool, field.ErrorList) {
	p := fieldpath.Pave(xr.Object)
	list, reported, errs := at[[]any](p, outputProviderIDList, "must be a list of provider IDs")
	switch {
	case errs != nil:
		return MachinePool{}, errs
	case !reported && isZero(value(p, specReplicas)):
		return MachinePool{ProviderIDList: []string{}}, nil
	case !reported:
		return MachinePool{}, field.ErrorList{field.Required(outputProviderIDList, "the composition has not reported the pool's machines")}
	}
	ids := make([]string, 0, len(list))
	seen := make(map[string]int, len(list))
	for i, item := range list {
		path := outputProviderIDList.Index(i)
		id, ok := item.(string)
		switch {
		case !ok:
			errs = append(errs, field.Invalid(path, item, "must be a string"))
		case !providerIDFormat.MatchString(id):
			errs = append(errs, field.Invalid(path, id, "must have the form <scheme>://<id>, for example aws:///eu-west-1a/i-0123"))
		default:
			if j, dup := seen[id]; dup {
				errs = append(errs, field.Duplicate(path, fmt.Sprintf("%s, also at index %d", id, j)))
				continue
			}
			seen[id] = i
			ids = append(ids, id)
		}
	}
	if len(errs) > 0 {
		return MachinePool{}, errs
	}
	return MachinePool{ProviderIDList: ids}, nil
}

// isZero reports whether v is the number 0, as decoded from JSON or YAML.
func isZero(v any) bool {
	switch n := v.(type) {
	case int64:
		return n == 0
	case float64:
		return n == 0
	}
	return false
}
