package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterProviderConfigReference names a cluster-scoped Crossplane
// credentials config: a ClusterProviderConfig, or a provider's legacy
// cluster-scoped ProviderConfig (a group has at most one cluster-scoped
// credentials kind, so group and name say which).
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

// CredentialSourceReference names a provider's ambient identity: a
// credentials source other than a Secret (InjectedIdentity, IRSA,
// PodIdentity, WebIdentity, Environment, Filesystem, ...). A ProviderConfig
// with such a source acts with an identity every namespace shares (the
// provider's service account, the node's role), so a namespace's own
// ProviderConfig may use one only when granted.
type CredentialSourceReference struct {
	// apiGroup of the provider's credentials kinds, for example
	// aws.m.upbound.io.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	APIGroup string `json:"apiGroup"`

	// source as the provider's ProviderConfig names it in
	// spec.credentials.source or spec.identity.source. A Secret of the
	// namespace's own needs no grant.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self != 'Secret'",message="a Secret of the namespace's own needs no grant; name an ambient source such as InjectedIdentity or IRSA"
	Source string `json:"source"`
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
// +kubebuilder:validation:XValidation:rule="has(self.providerConfigRef) != has(self.credentialSource)",message="a grant names exactly one of providerConfigRef and credentialSource"
// +kubebuilder:validation:XValidation:rule="!has(self.allowedRoles) || has(self.credentialSource)",message="allowedRoles belong to a credentialSource grant"
type ClusterProviderConfigGrantSpec struct {
	// providerConfigRef names the shared credentials config granted.
	// +optional
	ProviderConfigRef *ClusterProviderConfigReference `json:"providerConfigRef,omitempty"`

	// credentialSource names the ambient identity granted: the namespaces'
	// own ProviderConfigs of that provider may use that source.
	// +optional
	CredentialSource *CredentialSourceReference `json:"credentialSource,omitempty"`

	// allowedNamespaces are the namespaces whose composite resources may use
	// them.
	// +required
	AllowedNamespaces AllowedNamespaces `json:"allowedNamespaces"`

	// allowedRoles are, for a credentialSource grant, the roles a
	// namespace's own ProviderConfig on that source may assume from the
	// ambient identity (provider-upjet-aws: spec.assumeRoleChain[].roleARN,
	// spec.credentials.webIdentity.roleARN): a role's ARN, or an account's
	// ID (12 digits) for every role of that account. Empty: none, so the
	// config acts as the ambient identity itself. A config naming any other
	// role is refused, as is one sending the ambient identity's requests to
	// an endpoint of its own (spec.endpoint.url).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=2048
	AllowedRoles []string `json:"allowedRoles,omitempty"`
}

// ClusterProviderConfigGrant lets the composite resources of some namespaces
// use shared Crossplane credentials: a cluster-scoped credentials config, or
// a provider's ambient identity. Without a grant, shared credentials are
// denied: a tenant namespace may use its own ProviderConfigs with Secrets of
// its own, and only the shared credentials granted to it. Several grants for
// the same credentials add up. Written by the platform team.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=clusterproviderconfiggrants,scope=Cluster,categories=cluster-api,shortName=cpcg
// +kubebuilder:printcolumn:name="Group",type="string",JSONPath=".spec.providerConfigRef.apiGroup"
// +kubebuilder:printcolumn:name="ProviderConfig",type="string",JSONPath=".spec.providerConfigRef.name"
// +kubebuilder:printcolumn:name="SourceGroup",type="string",JSONPath=".spec.credentialSource.apiGroup",priority=1
// +kubebuilder:printcolumn:name="Source",type="string",JSONPath=".spec.credentialSource.source"
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
