package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderConfigKind is the kind of a Crossplane provider's credentials
// object.
// +kubebuilder:validation:Enum=ProviderConfig;ClusterProviderConfig
type ProviderConfigKind string

const (
	// ProviderConfigKindNamespaced is a ProviderConfig in the XR's own
	// namespace.
	ProviderConfigKindNamespaced ProviderConfigKind = "ProviderConfig"

	// ProviderConfigKindCluster is a cluster-scoped ClusterProviderConfig,
	// shared between namespaces that were granted its use.
	ProviderConfigKindCluster ProviderConfigKind = "ClusterProviderConfig"
)

// ProviderConfigReference names the Crossplane credentials every managed
// resource composed for the XR uses.
type ProviderConfigReference struct {
	// apiGroup is the API group of the provider's credentials kinds, for
	// example aws.m.upbound.io or kubernetes.m.crossplane.io.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	APIGroup string `json:"apiGroup"`

	// kind is ProviderConfig (namespaced, in the XR's namespace) or
	// ClusterProviderConfig (cluster-scoped, usable only by namespaces granted
	// its use).
	// +required
	Kind ProviderConfigKind `json:"kind"`

	// name of the ProviderConfig or ClusterProviderConfig.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// APIEndpoint is a host and port where a Kubernetes API server is served.
// +kubebuilder:validation:XValidation:rule="has(self.host) == has(self.port)",message="host and port must be set together"
type APIEndpoint struct {
	// host is the DNS name or IP address of the endpoint.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Host string `json:"host,omitempty"`

	// port is the TCP port of the endpoint.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// IsZero reports whether neither host nor port is set.
func (e APIEndpoint) IsZero() bool { return e.Host == "" && e.Port == 0 }

// EndpointOutput is an API endpoint as a composition reports it. It is
// deliberately loosely typed: the bridge validates it and reports a bad value
// as a condition naming the field, instead of the API server rejecting the
// composition's whole status write.
type EndpointOutput struct {
	// host the composition observed for the endpoint.
	// +optional
	Host string `json:"host,omitempty"`

	// port the composition observed for the endpoint.
	// +optional
	Port int64 `json:"port,omitempty"`
}

// Initialization reports the one-time provisioning milestones CAPI's v1beta2
// contract reads.
type Initialization struct {
	// provisioned is true once the infrastructure is provisioned: the XR is
	// Ready and Synced for its current generation and its contract outputs are
	// present and valid. Written by the bridge; CAPI reads it.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// CompositionSpec mirrors the fields Crossplane v2 adds under an XR's
// spec.crossplane. Crossplane owns their schema: the XRD generator leaves this
// field out and Crossplane adds it when it generates the CRD. It is declared
// here so that typed clients (and CAPI templates) keep and can set it.
type CompositionSpec struct {
	// compositionRef names the Composition that satisfies the XR. Written by
	// the user or the template; defaulted by Crossplane.
	// +optional
	CompositionRef *NameReference `json:"compositionRef,omitempty"`

	// compositionSelector selects a Composition by labels, for example
	// capxp.dev/backend: aws. Written by the user or the template.
	// +optional
	CompositionSelector *metav1.LabelSelector `json:"compositionSelector,omitempty"`

	// compositionRevisionRef pins a CompositionRevision.
	// +optional
	CompositionRevisionRef *NameReference `json:"compositionRevisionRef,omitempty"`

	// compositionRevisionSelector selects a CompositionRevision by labels.
	// +optional
	CompositionRevisionSelector *metav1.LabelSelector `json:"compositionRevisionSelector,omitempty"`

	// compositionUpdatePolicy is Automatic or Manual.
	// +optional
	CompositionUpdatePolicy *string `json:"compositionUpdatePolicy,omitempty"`

	// resourceRefs lists the composed resources. Written by Crossplane; the
	// bridge waits for each of them to be gone before it releases the XR.
	// +optional
	ResourceRefs []ResourceReference `json:"resourceRefs,omitempty"`
}

// NameReference refers to an object by name.
type NameReference struct {
	// name of the referenced object.
	Name string `json:"name"`
}

// ResourceReference refers to a composed resource.
type ResourceReference struct {
	// apiVersion of the composed resource.
	APIVersion string `json:"apiVersion"`
	// kind of the composed resource.
	Kind string `json:"kind"`
	// name of the composed resource.
	// +optional
	Name string `json:"name,omitempty"`
	// namespace of the composed resource, empty for cluster-scoped ones.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}
