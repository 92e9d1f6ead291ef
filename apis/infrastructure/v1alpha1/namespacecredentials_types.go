package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NamespaceCredentialsName is the name of the one NamespaceCredentials the
// bridge keeps in each namespace; the admission policy on managed
// resources reads it by that name, in the managed resource's namespace.
const NamespaceCredentialsName = "credentials"

// NamespaceCredentialsFinalizer keeps a namespace's NamespaceCredentials
// until no managed resource of an enforced provider is left in the
// namespace: the admission policies read it for every update of those
// (their provider's finalizer removal too), and refuse them without it.
const NamespaceCredentialsFinalizer = "capxp.dev/outlive-managed-resources"

// UsableConfig names a credentials config a namespace's managed resources
// may name in spec.providerConfigRef: a ProviderConfig of the namespace's
// own, or a ClusterProviderConfig granted to it.
type UsableConfig struct {
	// apiGroup of the provider's credentials kinds, for example
	// aws.m.upbound.io.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	APIGroup string `json:"apiGroup"`

	// kind of the config: ProviderConfig (in the namespace) or
	// ClusterProviderConfig.
	// +required
	// +kubebuilder:validation:Enum=ProviderConfig;ClusterProviderConfig
	Kind ProviderConfigKind `json:"kind"`

	// name of the config.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// RefusedConfig is a ProviderConfig of the namespace that its managed
// resources may not name, and why.
type RefusedConfig struct {
	UsableConfig `json:",inline"`

	// reason, CamelCase: NotGranted, SecretNotFound, SecretOutsideNamespace,
	// SharedIdentityInSecret.
	// +required
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`

	// message says what makes the config shared or unusable and what would
	// allow it.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message"`
}

// LockedObject is a ProviderConfig of the namespace, or a Secret one names,
// that the bridge judged the namespace's own and lists as usable: the API
// server refuses to change it (or to create it again under its name) while
// it is locked, so what the provider reads is what the bridge judged. A
// tenant rotates locked credentials under a new name.
type LockedObject struct {
	// apiGroup of the object: the provider's config group for a
	// ProviderConfig, "" for a Secret.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	APIGroup string `json:"apiGroup,omitempty"`

	// kind of the object.
	// +required
	// +kubebuilder:validation:Enum=ProviderConfig;Secret
	Kind string `json:"kind"`

	// name of the object, in the record's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// NamespaceCredentialsSpec is what a namespace's managed resources may name.
type NamespaceCredentialsSpec struct {
	// configs the namespace's managed resources may name: its own
	// ProviderConfigs whose credentials reach no identity but their own
	// Secret's, and the ClusterProviderConfigs and ambient sources granted to
	// it.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4096
	Configs []UsableConfig `json:"configs,omitempty"`

	// refused are the namespace's own ProviderConfigs its managed resources
	// may not name, with why.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	Refused []RefusedConfig `json:"refused,omitempty"`

	// locked are the namespace's own ProviderConfigs listed in configs, and
	// the Secrets whose contents decide whose identity they reach (a
	// kubeconfig's): they may not change while listed. The bridge locks
	// them before it judges them, and unlocks them once nothing running
	// uses what they held.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8192
	Locked []LockedObject `json:"locked,omitempty"`

	// networks are the cloud network IDs the namespace's own managed
	// resources report (for AWS: its VPCs', their default security
	// groups', its subnets' and its security groups'), each with the kind
	// and name of the managed resource reporting it. A managed resource
	// that puts a machine into a network (an instance's subnet or security
	// groups, a launch template's, an auto scaling group's subnets) is
	// admitted only with IDs listed here (ValidatingAdmissionPolicy
	// capxp-network-where-used). A platform grants an existing network by
	// creating Observe-only managed resources for it in the namespace.
	// +optional
	// +kubebuilder:validation:MaxProperties=16384
	Networks map[string]string `json:"networks,omitempty"`

	// allClusterConfigs is true when the manager runs with
	// --shared-credentials-for-all-namespaces: every ClusterProviderConfig
	// may be named without a grant.
	// +optional
	AllClusterConfigs bool `json:"allClusterConfigs,omitempty"`
}

// NamespaceCredentials records the credentials configs a namespace's managed
// resources may name. CAPXP's bridge keeps one, named "credentials", in every
// namespace, from the ClusterProviderConfigGrants, the namespace's labels, and
// what the namespace's ProviderConfigs and their Secrets hold. The API server
// reads it when it admits a managed resource of the enforced providers
// (ValidatingAdmissionPolicy capxp-credentials-where-used): a create, or a
// change of spec.providerConfigRef, naming a config the record does not list
// is refused, whichever Composition, default or function composed it.
// Written by the bridge alone; tenants may read theirs.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=namespacecredentials,scope=Namespaced,categories=cluster-api,shortName=nscreds
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type NamespaceCredentials struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the namespace's managed resources may name.
	// +optional
	Spec NamespaceCredentialsSpec `json:"spec,omitempty"`
}

// NamespaceCredentialsList is a list of NamespaceCredentials.
// +kubebuilder:object:root=true
type NamespaceCredentialsList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NamespaceCredentials `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &NamespaceCredentials{}, &NamespaceCredentialsList{})
}
