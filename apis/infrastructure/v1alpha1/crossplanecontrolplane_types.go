package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CrossplaneControlPlaneSpec is the desired state of a managed control plane.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.controlPlaneEndpoint) || (has(self.controlPlaneEndpoint) && self.controlPlaneEndpoint == oldSelf.controlPlaneEndpoint)",message="controlPlaneEndpoint is immutable once set"
type CrossplaneControlPlaneSpec struct {
	// version of Kubernetes the control plane runs, for example v1.36.5.
	// Written by the user, the template or CAPI's topology controller; the
	// composition passes it to the service.
	// +optional
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)([-+].+)?$`
	Version string `json:"version,omitempty"`

	// providerConfigRef names the Crossplane credentials the composed
	// resources use. Written by the user.
	// +optional
	ProviderConfigRef *ProviderConfigReference `json:"providerConfigRef,omitempty"`

	// network of the cluster the service places its endpoints in. Written
	// by the bridge, once, from the cluster XR's status.outputs.network
	// when the cluster's infrastructure is provisioned; a composition that
	// needs none ignores it.
	// +optional
	Network ControlPlaneNetwork `json:"network,omitempty,omitzero"`

	// controlPlaneEndpoint is where the control plane's API server is
	// served. Written by the bridge from status.outputs.controlPlaneEndpoint.
	// Immutable once set, as CAPI expects.
	// +optional
	ControlPlaneEndpoint APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// crossplane holds Crossplane's composition machinery (Crossplane owns
	// its schema; see CompositionSpec).
	// +optional
	Crossplane *CompositionSpec `json:"crossplane,omitempty"`
}

// ControlPlaneNetwork is the part of the cluster's network a managed
// control plane uses: a service such as EKS places its API server's network
// interfaces in one subnet per failure domain and guards them with the
// cluster's control plane security groups. Written by the bridge from the
// cluster XR's status.outputs.network.
type ControlPlaneNetwork struct {
	// region of the cluster (its spec.parameters.region), for backends that
	// have regions.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Region string `json:"region,omitempty"`

	// networkID of the cluster's network.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	NetworkID string `json:"networkID,omitempty"`

	// subnetIDs of the service's network interfaces: one per failure domain
	// of the cluster, private subnets first.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=255
	SubnetIDs []string `json:"subnetIDs,omitempty"`

	// securityGroupIDs of the cluster's ControlPlane role.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=255
	SecurityGroupIDs []string `json:"securityGroupIDs,omitempty"`
}

// ControlPlaneInitialization reports the milestone CAPI's v1beta2
// ControlPlane contract reads.
type ControlPlaneInitialization struct {
	// controlPlaneInitialized is true once the control plane serves its API:
	// the XR is Ready and Synced for its current generation and its contract
	// outputs (endpoint, version, kubeconfig) are present and valid. Written
	// by the bridge; CAPI reads it.
	// +optional
	ControlPlaneInitialized *bool `json:"controlPlaneInitialized,omitempty"`
}

// CrossplaneControlPlaneStatus is the observed state of a managed control
// plane.
type CrossplaneControlPlaneStatus struct {
	// initialization reports the control plane's milestone (CAPI v1beta2
	// contract). Written by the bridge.
	// +optional
	Initialization ControlPlaneInitialization `json:"initialization,omitempty,omitzero"`

	// externalManagedControlPlane is true: the control plane is a service,
	// with no Machines of CAPI's. CAPI then deletes a worker's Node without
	// looking for control-plane Machines. Written by the bridge.
	// +optional
	ExternalManagedControlPlane *bool `json:"externalManagedControlPlane,omitempty"`

	// version of Kubernetes the control plane serves. Written by the bridge
	// from status.outputs.version; CAPI reads it.
	// +optional
	Version string `json:"version,omitempty"`

	// outputs are what the composition reports for the bridge to map onto
	// the contract. Written by the composition.
	// +optional
	Outputs ControlPlaneOutputs `json:"outputs,omitempty,omitzero"`

	// conditions of the XR. Crossplane owns Ready and Synced.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ControlPlaneOutputs are the values a control-plane composition reports.
type ControlPlaneOutputs struct {
	// controlPlaneEndpoint the service serves the API server at. The bridge
	// copies it, once valid, to spec.controlPlaneEndpoint.
	// +optional
	ControlPlaneEndpoint *EndpointOutput `json:"controlPlaneEndpoint,omitempty"`

	// version of Kubernetes the service reports it runs: a Kubernetes
	// version (v1.36.5), or the minor alone (1.36 or v1.36) for a service
	// that manages patch levels itself, which the bridge reads as the patch
	// spec.version asks for while the minors agree, and as the minor's
	// first patch while they do not. The bridge copies it to status.version.
	// +optional
	Version string `json:"version,omitempty"`

	// kubeconfig names the Secret, in the XR's namespace, that holds an
	// administrator's kubeconfig of the control plane (a managed resource's
	// connection secret, for example). The bridge copies it into CAPI's
	// <cluster>-kubeconfig Secret, and again whenever it changes; the
	// kubeconfig itself never sits in the XR.
	// +optional
	Kubeconfig *SecretKeyOutput `json:"kubeconfig,omitempty"`
}

// SecretKeyOutput names a key of a Secret in the XR's namespace. Loosely
// typed on purpose: the bridge validates it.
type SecretKeyOutput struct {
	// name of the Secret.
	// +optional
	Name string `json:"name,omitempty"`

	// key of the Secret's data that holds the value; "value" when empty.
	// +optional
	Key string `json:"key,omitempty"`
}

// CrossplaneControlPlane is a composite resource that implements CAPI's
// ControlPlane contract for a managed control plane (a cloud's Kubernetes
// service, or any API server a Composition provisions). A Composition
// provisions it; CAPXP's bridge maps its readiness and outputs onto the
// contract and writes the cluster's kubeconfig Secret.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=crossplanecontrolplanes,scope=Namespaced,categories=cluster-api,shortName=xpcp
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="CAPI Cluster"
// +kubebuilder:printcolumn:name="Initialized",type="boolean",JSONPath=".status.initialization.controlPlaneInitialized",description="Control plane initialized"
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".status.version",description="Kubernetes version served"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host",description="Control plane endpoint"
type CrossplaneControlPlane struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the control plane.
	// +required
	Spec CrossplaneControlPlaneSpec `json:"spec"`

	// status is the observed state of the control plane.
	// +optional
	Status CrossplaneControlPlaneStatus `json:"status,omitempty,omitzero"`
}

// CrossplaneControlPlaneList is a list of CrossplaneControlPlanes.
// +kubebuilder:object:root=true
type CrossplaneControlPlaneList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CrossplaneControlPlane `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &CrossplaneControlPlane{}, &CrossplaneControlPlaneList{})
}
