package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CrossplaneMachineParameters is the backend-neutral description of a
// machine. CAPI replaces machines rather than changing them, so parameters are
// immutable once the machine exists. Written by the user through the
// CrossplaneMachineTemplate, or on the machine itself for a host that already
// exists.
// +kubebuilder:validation:XValidation:rule="has(self.size) || has(self.host)",message="size is required, unless host names a host that already exists",fieldPath=".size",reason=FieldValueRequired
type CrossplaneMachineParameters struct {
	// size of the machine, as the composition understands it: an instance
	// type for AWS (m6i.large), a size class for other backends. Required
	// unless host is set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Size string `json:"size,omitempty"`

	// image the machine boots: an image ID (an AMI for AWS), or a name the
	// composition resolves. Compositions pick a default when empty.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Image string `json:"image,omitempty"`

	// rootVolume configures the machine's root disk.
	// +optional
	RootVolume RootVolumeParameters `json:"rootVolume,omitempty,omitzero"`

	// publicIP asks for a publicly reachable address.
	// +optional
	PublicIP *bool `json:"publicIP,omitempty"`

	// host names a machine that already exists, for compositions that
	// compose nothing and report it as it is (the byo backend). One host is
	// one machine: a CrossplaneMachineTemplate cannot name one.
	// +optional
	Host *ExistingHost `json:"host,omitempty"`
}

// ExistingHost is a machine that exists outside Crossplane: a bare-metal
// server, a VM made by other tools. CAPXP never creates or deletes it.
type ExistingHost struct {
	// providerID of the host, as its Node will report it (<scheme>://...).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9+.-]*://`
	ProviderID string `json:"providerID"`

	// addresses of the host.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Addresses []HostAddress `json:"addresses,omitempty"`

	// failureDomain the host is in, one of the cluster's. A Machine placed
	// in another failure domain is refused by the machine gate.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`
}

// HostAddress is an address of an existing host.
type HostAddress struct {
	// type of the address.
	// +required
	// +kubebuilder:validation:Enum=Hostname;ExternalIP;InternalIP;ExternalDNS;InternalDNS
	Type string `json:"type"`

	// address itself.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Address string `json:"address"`
}

// RootVolumeParameters configures a root disk.
type RootVolumeParameters struct {
	// sizeGiB of the disk.
	// +optional
	// +kubebuilder:validation:Minimum=8
	// +kubebuilder:validation:Maximum=16384
	SizeGiB int32 `json:"sizeGiB,omitempty"`

	// type of the disk, as the backend names it (gp3 for AWS, for example).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Type string `json:"type,omitempty"`
}

// SecretKeyReference names a key of a Secret in the XR's own namespace.
type SecretKeyReference struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key within the Secret.
	// +optional
	// +kubebuilder:default=value
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// MachineBootstrap carries the machine's bootstrap data by reference only:
// bootstrap data holds keys and tokens and is never copied into an XR or a
// composed resource.
type MachineBootstrap struct {
	// dataSecretRef names the Secret holding the bootstrap data (CAPI's
	// Machine.spec.bootstrap.dataSecretName, key "value"). Written by the
	// bridge once the data exists; immutable once set.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="bootstrap.dataSecretRef is immutable once set"
	DataSecretRef *SecretKeyReference `json:"dataSecretRef,omitempty"`
}

// MachineNetwork is the part of the cluster's network a machine uses.
// Written by the bridge from the cluster XR's status.outputs.network.
type MachineNetwork struct {
	// region of the cluster (its spec.parameters.region), for backends that
	// have regions.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Region string `json:"region,omitempty"`

	// networkID of the cluster's network.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	NetworkID string `json:"networkID,omitempty"`

	// subnetID of the subnet in the machine's failure domain.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	SubnetID string `json:"subnetID,omitempty"`

	// securityGroupIDs the machine joins.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=255
	SecurityGroupIDs []string `json:"securityGroupIDs,omitempty"`
}

// CrossplaneMachineSpec is the desired state of a CrossplaneMachine.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerID) || (has(self.providerID) && self.providerID == oldSelf.providerID)",message="providerID is immutable once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.failureDomain) || (has(self.failureDomain) && self.failureDomain == oldSelf.failureDomain)",message="failureDomain is immutable once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.bootstrap) || !has(oldSelf.bootstrap.dataSecretRef) || (has(self.bootstrap) && has(self.bootstrap.dataSecretRef))",message="bootstrap.dataSecretRef cannot be removed once set"
type CrossplaneMachineSpec struct {
	// parameters describe the machine. Written by the user (template).
	// Changed only by CAPI, when it updates the machine in place (the
	// capxp-machine-parameters admission policy): a change of the template
	// reaches the machine by a rollout.
	// +required
	Parameters CrossplaneMachineParameters `json:"parameters"`

	// providerID identifies the machine to Kubernetes (<scheme>://...).
	// Written by the bridge: when the machine's gate opens if its
	// Composition declares it (the capxp.dev/provider-id annotation), else
	// from status.outputs.providerID; immutable once set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`

	// failureDomain the machine is placed in. Written by the bridge from
	// Machine.spec.failureDomain; immutable once set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// bootstrap data, by reference. Written by the bridge.
	// +optional
	Bootstrap MachineBootstrap `json:"bootstrap,omitempty,omitzero"`

	// network the machine joins. Written by the bridge.
	// +optional
	Network MachineNetwork `json:"network,omitempty,omitzero"`

	// providerConfigRef names the Crossplane credentials the composed
	// resources use. Written by the user, or by the bridge from the
	// cluster's when empty.
	// +optional
	ProviderConfigRef *ProviderConfigReference `json:"providerConfigRef,omitempty"`

	// crossplane holds Crossplane's composition machinery (Crossplane owns
	// its schema; see CompositionSpec).
	// +optional
	Crossplane *CompositionSpec `json:"crossplane,omitempty"`
}

// MachineAddress is an address of a machine as the composition reports it.
// Loosely typed on purpose: the bridge validates type and address.
type MachineAddress struct {
	// type of the address: Hostname, ExternalIP, InternalIP, ExternalDNS or
	// InternalDNS.
	// +optional
	Type string `json:"type,omitempty"`

	// address itself.
	// +optional
	Address string `json:"address,omitempty"`
}

// MachineOutputs are the values a machine composition reports.
type MachineOutputs struct {
	// providerID of the provisioned machine; the bridge checks its
	// <scheme>://... form and copies it to spec.providerID.
	// +optional
	ProviderID string `json:"providerID,omitempty"`
}

// CrossplaneMachineStatus is the observed state of a CrossplaneMachine.
type CrossplaneMachineStatus struct {
	// initialization reports provisioning milestones (CAPI v1beta2 contract).
	// Written by the bridge.
	// +optional
	Initialization Initialization `json:"initialization,omitempty,omitzero"`

	// ready mirrors initialization.provisioned for readers of CAPI's v1beta1
	// contract. Deprecated: kept while CAPI still reads it. Written by the
	// bridge.
	// +optional
	Ready bool `json:"ready,omitempty"`

	// addresses of the machine. Written by the composition; checked by the
	// bridge.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Addresses []MachineAddress `json:"addresses,omitempty"`

	// failureDomain the machine actually landed in. Written by the
	// composition; checked by the bridge.
	// +optional
	FailureDomain string `json:"failureDomain,omitempty"`

	// outputs are what the composition reports for the bridge to map onto the
	// contract. Written by the composition.
	// +optional
	Outputs MachineOutputs `json:"outputs,omitempty,omitzero"`

	// conditions of the XR. Crossplane owns Ready and Synced; the bridge owns
	// the condition types it documents.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CrossplaneMachine is a composite resource that implements CAPI's
// InfraMachine contract. The bridge keeps it paused until its cluster's
// infrastructure is provisioned and its bootstrap data exists.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=crossplanemachines,scope=Namespaced,categories=cluster-api,shortName=xpm
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="CAPI Cluster"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Infrastructure provisioned"
// +kubebuilder:printcolumn:name="ProviderID",type="string",JSONPath=".spec.providerID",description="Provider ID"
type CrossplaneMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the machine.
	// +required
	Spec CrossplaneMachineSpec `json:"spec"`

	// status is the observed state of the machine.
	// +optional
	Status CrossplaneMachineStatus `json:"status,omitempty,omitzero"`
}

// CrossplaneMachineList is a list of CrossplaneMachines.
// +kubebuilder:object:root=true
type CrossplaneMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CrossplaneMachine `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &CrossplaneMachine{}, &CrossplaneMachineList{})
}
