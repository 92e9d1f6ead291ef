package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LoadBalancerScheme says who can reach the control plane's load balancer.
// +kubebuilder:validation:Enum=InternetFacing;Internal
type LoadBalancerScheme string

const (
	// LoadBalancerSchemeInternetFacing serves the API server publicly.
	LoadBalancerSchemeInternetFacing LoadBalancerScheme = "InternetFacing"
	// LoadBalancerSchemeInternal serves the API server inside the network only.
	LoadBalancerSchemeInternal LoadBalancerScheme = "Internal"
)

// SubnetRole says what a subnet is for.
// +kubebuilder:validation:Enum=Public;Private
type SubnetRole string

const (
	// SubnetRolePublic subnets hold load balancers and NAT gateways.
	SubnetRolePublic SubnetRole = "Public"
	// SubnetRolePrivate subnets hold machines.
	SubnetRolePrivate SubnetRole = "Private"
)

// CrossplaneClusterParameters is the backend-neutral description of a
// cluster's infrastructure. One shape serves every Composition: the AWS one
// creates what it describes, the bring-your-own one reports existing
// infrastructure named here, the local one ignores what it cannot use.
// Written by the user or the CrossplaneClusterTemplate.
type CrossplaneClusterParameters struct {
	// region the infrastructure lives in, for backends that have regions.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Region string `json:"region,omitempty"`

	// network describes the cluster's network.
	// +optional
	Network NetworkParameters `json:"network,omitempty,omitzero"`

	// failureDomains the cluster should spread over (availability zones, for
	// example). The composition reports the ones it provisioned in
	// status.failureDomains.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	FailureDomains []FailureDomainParameters `json:"failureDomains,omitempty"`

	// controlPlaneLoadBalancer configures the load balancer in front of the
	// control plane.
	// +optional
	// +kubebuilder:default={}
	ControlPlaneLoadBalancer LoadBalancerParameters `json:"controlPlaneLoadBalancer,omitempty,omitzero"`
}

// NetworkParameters describes the cluster network to create, or the existing
// one to use.
type NetworkParameters struct {
	// id of an existing network (a VPC ID, for example) to use instead of
	// creating one. Bring-your-own compositions require it.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	ID string `json:"id,omitempty"`

	// cidrBlock of the network to create.
	// +optional
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="must be a CIDR block such as 10.0.0.0/16"
	CIDRBlock string `json:"cidrBlock,omitempty"`

	// subnets to create or, with an id, to use.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(s, !has(s.id) || self.exists_one(o, has(o.id) && o.id == s.id))",message="subnet ids must be unique"
	Subnets []SubnetParameters `json:"subnets,omitempty"`
}

// SubnetParameters describes one subnet.
// +kubebuilder:validation:XValidation:rule="has(self.id) || has(self.cidrBlock)",message="a subnet needs an id (existing) or a cidrBlock (to create)"
type SubnetParameters struct {
	// id of an existing subnet.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	ID string `json:"id,omitempty"`

	// cidrBlock of the subnet to create.
	// +optional
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="must be a CIDR block such as 10.0.1.0/24"
	CIDRBlock string `json:"cidrBlock,omitempty"`

	// failureDomain the subnet is in.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain"`

	// role of the subnet.
	// +optional
	// +kubebuilder:default=Private
	Role SubnetRole `json:"role,omitempty"`
}

// FailureDomainParameters names a wanted failure domain.
type FailureDomainParameters struct {
	// name of the failure domain, for example us-east-1a.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`

	// controlPlane says whether control-plane machines may be placed here.
	// +optional
	// +kubebuilder:default=true
	ControlPlane *bool `json:"controlPlane,omitempty"`
}

// LoadBalancerParameters configures the control plane's load balancer.
type LoadBalancerParameters struct {
	// scheme of the load balancer.
	// +optional
	// +kubebuilder:default=InternetFacing
	Scheme LoadBalancerScheme `json:"scheme,omitempty"`

	// port the load balancer listens on for the API server.
	// +optional
	// +kubebuilder:default=6443
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// CrossplaneClusterSpec is the desired state of a CrossplaneCluster.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.controlPlaneEndpoint) || (has(self.controlPlaneEndpoint) && self.controlPlaneEndpoint == oldSelf.controlPlaneEndpoint)",message="controlPlaneEndpoint is immutable once set"
type CrossplaneClusterSpec struct {
	// parameters describe the infrastructure. Written by the user.
	// +optional
	// +kubebuilder:default={}
	Parameters CrossplaneClusterParameters `json:"parameters,omitempty,omitzero"`

	// providerConfigRef names the Crossplane credentials the composed
	// resources use. Machines of the cluster inherit it. Written by the user.
	// +optional
	ProviderConfigRef *ProviderConfigReference `json:"providerConfigRef,omitempty"`

	// controlPlaneEndpoint is where the cluster's API server is served.
	// Written by the bridge from status.outputs.controlPlaneEndpoint, or by the
	// user for externally provisioned infrastructure. Immutable once set, as
	// CAPI expects.
	// +optional
	ControlPlaneEndpoint APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// crossplane holds Crossplane's composition machinery (Crossplane owns
	// its schema; see CompositionSpec).
	// +optional
	Crossplane *CompositionSpec `json:"crossplane,omitempty"`
}

// CrossplaneClusterStatus is the observed state of a CrossplaneCluster.
type CrossplaneClusterStatus struct {
	// initialization reports provisioning milestones (CAPI v1beta2 contract).
	// Written by the bridge.
	// +optional
	Initialization Initialization `json:"initialization,omitempty,omitzero"`

	// ready mirrors initialization.provisioned for readers of CAPI's v1beta1
	// contract. Deprecated: kept while CAPI still reads it. Written by the
	// bridge.
	// +optional
	Ready bool `json:"ready,omitempty"`

	// failureDomains the cluster's machines can be placed in (CAPI v1beta2 list
	// shape). Written by the composition; checked by the bridge (names must be
	// non-empty and unique) before the cluster counts as provisioned.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []FailureDomain `json:"failureDomains,omitempty"`

	// outputs are what the composition reports for the bridge to map onto the
	// contract. Written by the composition.
	// +optional
	Outputs ClusterOutputs `json:"outputs,omitempty,omitzero"`

	// conditions of the XR. Crossplane owns Ready and Synced (CAPI mirrors
	// Ready into the Cluster's InfrastructureReady); the bridge owns the
	// condition types it documents.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// FailureDomain is a failure domain as CAPI's v1beta2 contract reads it.
// Loosely typed on purpose: the bridge validates it.
type FailureDomain struct {
	// name of the failure domain.
	// +optional
	Name string `json:"name,omitempty"`

	// controlPlane says whether control-plane machines may be placed here.
	// +optional
	ControlPlane *bool `json:"controlPlane,omitempty"`

	// attributes are free-form details of the failure domain.
	// +optional
	Attributes map[string]string `json:"attributes,omitempty"`
}

// ClusterOutputs are the values a cluster composition reports.
type ClusterOutputs struct {
	// controlPlaneEndpoint the composition provisioned (a load balancer's
	// DNS name and port, for example). The bridge copies it, once valid, to
	// spec.controlPlaneEndpoint.
	// +optional
	ControlPlaneEndpoint *EndpointOutput `json:"controlPlaneEndpoint,omitempty"`

	// network the composition provisioned; the bridge injects the part each
	// machine needs into the machine XR's spec.network.
	// +optional
	Network *NetworkOutputs `json:"network,omitempty"`
}

// NetworkOutputs describe the provisioned network for machines to use.
type NetworkOutputs struct {
	// id of the network.
	// +optional
	ID string `json:"id,omitempty"`

	// subnets of the network.
	// +optional
	// +listType=atomic
	Subnets []SubnetOutput `json:"subnets,omitempty"`

	// securityGroups of the network.
	// +optional
	// +listType=atomic
	SecurityGroups []SecurityGroupOutput `json:"securityGroups,omitempty"`
}

// SubnetOutput is a provisioned subnet.
type SubnetOutput struct {
	// id of the subnet.
	// +optional
	ID string `json:"id,omitempty"`
	// failureDomain the subnet is in.
	// +optional
	FailureDomain string `json:"failureDomain,omitempty"`
	// cidrBlock of the subnet.
	// +optional
	CIDRBlock string `json:"cidrBlock,omitempty"`
	// role of the subnet: Public or Private.
	// +optional
	Role string `json:"role,omitempty"`
}

// SecurityGroupOutput is a provisioned security group (or firewall rule set).
type SecurityGroupOutput struct {
	// id of the security group.
	// +optional
	ID string `json:"id,omitempty"`
	// role of the security group: ControlPlane, Node or LoadBalancer.
	// +optional
	Role string `json:"role,omitempty"`
}

// CrossplaneCluster is a composite resource that implements CAPI's
// InfraCluster contract. A Composition (aws, byo, local, or a platform team's
// own) provisions it; CAPXP's bridge maps its readiness and outputs onto the
// contract.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=crossplaneclusters,scope=Namespaced,categories=cluster-api,shortName=xpc
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="CAPI Cluster"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Infrastructure provisioned"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host",description="Control plane endpoint"
type CrossplaneCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the cluster's infrastructure. Crossplane
	// requires every composite resource to have one, even if empty.
	// +required
	Spec CrossplaneClusterSpec `json:"spec"`

	// status is the observed state of the cluster's infrastructure.
	// +optional
	Status CrossplaneClusterStatus `json:"status,omitempty,omitzero"`
}

// CrossplaneClusterList is a list of CrossplaneClusters.
// +kubebuilder:object:root=true
type CrossplaneClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CrossplaneCluster `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &CrossplaneCluster{}, &CrossplaneClusterList{})
}
