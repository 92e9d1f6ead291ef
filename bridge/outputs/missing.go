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
		if e.Type != field.ErrorTypeRequired || e.Field != outputEndpoint.String() && e.Field != outputProviderID.String() {
			return false
		}
	}
	return true
}
