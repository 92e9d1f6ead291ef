package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MachinePoolParameters is the backend-neutral description of a pool's
// machines. Unlike a machine's, they may change: the backend rolls the
// pool's instances onto them (an auto scaling group's instance refresh).
type MachinePoolParameters struct {
	// size of each machine, as the composition understands it: an instance
	// type for AWS (m6i.large), a size class for other backends.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Size string `json:"size"`

	// image the machines boot: an image ID (an AMI for AWS), or a name the
	// composition resolves. Compositions pick a default when empty.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Image string `json:"image,omitempty"`

	// rootVolume configures each machine's root disk.
	// +optional
	RootVolume RootVolumeParameters `json:"rootVolume,omitempty,omitzero"`
}

// MachinePoolBootstrap carries the pool's bootstrap data by reference only.
// It follows the MachinePool's template: a new bootstrap data secret is a new
// launch configuration for the pool's next machines.
type MachinePoolBootstrap struct {
	// dataSecretRef names the Secret holding the bootstrap data (CAPI's
	// MachinePool.spec.template.spec.bootstrap.dataSecretName, key
	// "value"). Written by the bridge.
	// +optional
	DataSecretRef *SecretKeyReference `json:"dataSecretRef,omitempty"`
}

// MachinePoolNetwork is the part of the cluster's network a pool uses.
// Written by the bridge from the cluster XR's status.outputs.network.
type MachinePoolNetwork struct {
	// region of the cluster (its spec.parameters.region), for backends that
	// have regions.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Region string `json:"region,omitempty"`

	// networkID of the cluster's network.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	NetworkID string `json:"networkID,omitempty"`

	// subnetIDs the pool spreads its machines over: one per failure domain
	// of the pool (every failure domain of the cluster when the pool names
	// none), private subnets first.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=255
	SubnetIDs []string `json:"subnetIDs,omitempty"`

	// securityGroupIDs the pool's machines join.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=255
	SecurityGroupIDs []string `json:"securityGroupIDs,omitempty"`
}

// CrossplaneMachinePoolSpec is the desired state of a CrossplaneMachinePool.
type CrossplaneMachinePoolSpec struct {
	// parameters describe the pool's machines. Written by the user.
	// +required
	Parameters MachinePoolParameters `json:"parameters"`

	// replicas is how many machines the pool runs. Written by the bridge
	// from MachinePool.spec.replicas, whenever it changes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Replicas *int32 `json:"replicas,omitempty"`

	// providerIDList identifies the pool's machines to Kubernetes
	// (<scheme>://...), as CAPI's InfraMachinePool contract has it. Written
	// by the bridge from status.outputs.providerIDList.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=512
	ProviderIDList []string `json:"providerIDList,omitempty"`

	// failureDomains the pool spreads its machines over. Written by the
	// bridge from MachinePool.spec.failureDomains, or, when that is empty,
	// every failure domain of the cluster; empty only when the cluster
	// reports none.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=256
	FailureDomains []string `json:"failureDomains,omitempty"`

	// version of Kubernetes the pool's machines run. Written by the bridge
	// from MachinePool.spec.template.spec.version.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version,omitempty"`

	// bootstrap data, by reference. Written by the bridge; absent when the
	// MachinePool's data secret name is empty (instances that need none).
	// +optional
	Bootstrap MachinePoolBootstrap `json:"bootstrap,omitempty,omitzero"`

	// network the pool's machines join. Written by the bridge.
	// +optional
	Network MachinePoolNetwork `json:"network,omitempty,omitzero"`

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

// MachinePoolOutputs are the values a machine pool composition reports.
type MachinePoolOutputs struct {
	// providerIDList of the pool's running machines; the bridge checks each
	// one's <scheme>://... form and that none repeats, and copies the list to
	// spec.providerIDList and its length to status.replicas.
	// +optional
	// +listType=atomic
	ProviderIDList []string `json:"providerIDList,omitempty"`
}

// CrossplaneMachinePoolStatus is the observed state of a
// CrossplaneMachinePool.
type CrossplaneMachinePoolStatus struct {
	// initialization reports provisioning milestones (CAPI v1beta2 contract).
	// Written by the bridge.
	// +optional
	Initialization Initialization `json:"initialization,omitempty,omitzero"`

	// ready mirrors initialization.provisioned for readers of CAPI's v1beta1
	// contract, which CAPI's MachinePool controller still is. Written by the
	// bridge.
	// +optional
	Ready bool `json:"ready,omitempty"`

	// replicas is how many machines the pool runs: the length of
	// spec.providerIDList. Written by the bridge.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// outputs are what the composition reports for the bridge to map onto the
	// contract. Written by the composition.
	// +optional
	Outputs MachinePoolOutputs `json:"outputs,omitempty,omitzero"`

	// conditions of the XR. Crossplane owns Ready and Synced; the bridge owns
	// the condition types it documents.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CrossplaneMachinePool is a composite resource that implements CAPI's
// InfraMachinePool contract: a group of like machines the backend scales
// (an auto scaling group). The bridge keeps it paused until its cluster's
// infrastructure is provisioned and its bootstrap data exists, and keeps its
// replicas those of its MachinePool.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=crossplanemachinepools,scope=Namespaced,categories=cluster-api,shortName=xpmp
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="CAPI Cluster"
// +kubebuilder:printcolumn:name="Desired",type="integer",JSONPath=".spec.replicas",description="Machines asked for"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas",description="Machines running"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Infrastructure provisioned"
type CrossplaneMachinePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the pool.
	// +required
	Spec CrossplaneMachinePoolSpec `json:"spec"`

	// status is the observed state of the pool.
	// +optional
	Status CrossplaneMachinePoolStatus `json:"status,omitempty,omitzero"`
}

// CrossplaneMachinePoolList is a list of CrossplaneMachinePools.
// +kubebuilder:object:root=true
type CrossplaneMachinePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CrossplaneMachinePool `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &CrossplaneMachinePool{}, &CrossplaneMachinePoolList{})
}
