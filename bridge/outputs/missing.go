package outputs

import "k8s.io/apimachinery/pkg/util/validation/field"

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
