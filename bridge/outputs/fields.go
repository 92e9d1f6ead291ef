package outputs

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// Fields are the contract's fields a mapping sets on its XR once the XR
// satisfies its contract, by field path ("spec.providerID"). Each mapped
// kind says its own (Spec): a new field mapped onto a contract is a field of
// the kind's struct, read and checked by its Map function, and set here.
type Fields map[string]any

// Set writes the fields onto u.
func (f Fields) Set(u *unstructured.Unstructured) {
	p := fieldpath.Pave(u.Object)
	for path, v := range f {
		// The paths are this package's own, of objects: setting cannot
		// fail on them.
		_ = p.SetValue(path, v)
	}
}

// endpointFields is spec.controlPlaneEndpoint holding e.
func endpointFields(e infrav1.APIEndpoint) Fields {
	return Fields{"spec.controlPlaneEndpoint": map[string]any{"host": e.Host, "port": int64(e.Port)}}
}

// Spec is what an InfraCluster XR's spec holds once it is provisioned: the
// control plane endpoint, unless a managed control plane provides it (then
// nothing: CAPI copies an infrastructure endpoint first).
func (c Cluster) Spec(endpointFromControlPlane bool) Fields {
	if endpointFromControlPlane {
		return Fields{}
	}
	return endpointFields(c.Endpoint)
}

// Spec is what an InfraMachine XR's spec holds once it is provisioned.
func (m Machine) Spec() Fields { return Fields{"spec.providerID": m.ProviderID} }

// Spec is what an InfraMachinePool XR's spec holds once it is provisioned.
func (m MachinePool) Spec() Fields {
	ids := make([]any, 0, len(m.ProviderIDList))
	for _, id := range m.ProviderIDList {
		ids = append(ids, id)
	}
	return Fields{"spec.providerIDList": ids}
}

// Spec is what a ControlPlane XR's spec holds once it is initialized.
func (c ControlPlane) Spec() Fields { return endpointFields(c.Endpoint) }
