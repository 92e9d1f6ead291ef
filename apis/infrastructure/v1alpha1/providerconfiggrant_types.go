package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterProviderConfigReference names a cluster-scoped Crossplane
// ClusterProviderConfig.
type ClusterProviderConfigReference struct {
	// apiGroup of the provider's credentials kinds, for example
	// aws.m.upbound.io.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	APIGroup string `json:"apiGroup"`

	// name of the ClusterProviderConfig.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// AllowedNamespaces says which namespaces a grant covers: those listed by
// name, and those whose labels match the selector. Both empty grants
// nothing. Unlike a Kubernetes selector elsewhere, an empty selector ({})
// matches no namespace here: shared credentials are never granted to every
// namespace by accident. To grant every namespace, say so with an
// expression, for example {key: kubernetes.io/metadata.name, operator:
// Exists}.
// +kubebuilder:validation:XValidation:rule="has(self.names) || has(self.selector)",message="allowedNamespaces needs names or a selector"
type AllowedNamespaces struct {
	// names of namespaces granted.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	Names []string `json:"names,omitempty"`

	// selector of namespaces granted, by their labels. Its expressions are
	// checked as Kubernetes checks a selector, so that a grant the bridge
	// could not read is refused when written.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? has(e.values) && size(e.values) > 0 : e.operator in ['Exists', 'DoesNotExist'] && (!has(e.values) || size(e.values) == 0))",message="each of matchExpressions needs operator In or NotIn with values, or Exists or DoesNotExist without values"
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// ClusterProviderConfigGrantSpec is the desired state of a
// ClusterProviderConfigGrant.
type ClusterProviderConfigGrantSpec struct {
	// providerConfigRef names the shared credentials granted.
	// +required
	ProviderConfigRef ClusterProviderConfigReference `json:"providerConfigRef"`

	// allowedNamespaces are the namespaces whose composite resources may use
	// them.
	// +required
	AllowedNamespaces AllowedNamespaces `json:"allowedNamespaces"`
}

// ClusterProviderConfigGrant lets the composite resources of some namespaces
// use a shared Crossplane ClusterProviderConfig. Without a grant, shared
// credentials are denied: a tenant namespace may use its own
// ProviderConfigs and only the ClusterProviderConfigs granted to it. Several
// grants for one ClusterProviderConfig add up. Written by the platform team.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=clusterproviderconfiggrants,scope=Cluster,categories=cluster-api,shortName=cpcg
// +kubebuilder:printcolumn:name="Group",type="string",JSONPath=".spec.providerConfigRef.apiGroup"
// +kubebuilder:printcolumn:name="ProviderConfig",type="string",JSONPath=".spec.providerConfigRef.name"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type ClusterProviderConfigGrant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says what is granted to whom.
	// +required
	Spec ClusterProviderConfigGrantSpec `json:"spec"`
}

// ClusterProviderConfigGrantList is a list of ClusterProviderConfigGrants.
// +kubebuilder:object:root=true
type ClusterProviderConfigGrantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterProviderConfigGrant `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &ClusterProviderConfigGrant{}, &ClusterProviderConfigGrantList{})
}
