package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TemplateObjectMeta is the metadata CAPI copies from a template onto the
// object it creates from it.
type TemplateObjectMeta struct {
	// labels to put on the created XR.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations to put on the created XR.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// CrossplaneClusterTemplateResource is what a CrossplaneClusterTemplate
// stamps out.
type CrossplaneClusterTemplateResource struct {
	// metadata of the created CrossplaneCluster.
	// +optional
	ObjectMeta TemplateObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec of the created CrossplaneCluster; spec.crossplane selects its
	// Composition.
	// +required
	Spec CrossplaneClusterSpec `json:"spec"`
}

// CrossplaneClusterTemplateSpec is the desired state of a
// CrossplaneClusterTemplate.
type CrossplaneClusterTemplateSpec struct {
	// template of the CrossplaneCluster.
	// +required
	Template CrossplaneClusterTemplateResource `json:"template"`
}

// CrossplaneClusterTemplate is a template CAPI (ClusterClass) clones into
// CrossplaneClusters. It is a plain CRD, not a composite resource. Templates
// are immutable (the bridge's template immutability policy refuses a changed
// spec, but for CAPI's topology dry-runs): create a new one to change
// clusters.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=crossplaneclustertemplates,scope=Namespaced,categories=cluster-api,shortName=xpct
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"
type CrossplaneClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec CrossplaneClusterTemplateSpec `json:"spec"`
}

// CrossplaneClusterTemplateList is a list of CrossplaneClusterTemplates.
// +kubebuilder:object:root=true
type CrossplaneClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CrossplaneClusterTemplate `json:"items"`
}

// CrossplaneMachineTemplateResource is what a CrossplaneMachineTemplate
// stamps out.
type CrossplaneMachineTemplateResource struct {
	// metadata of the created CrossplaneMachine.
	// +optional
	ObjectMeta TemplateObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec of the created CrossplaneMachine. What the bridge writes per
	// machine (its provider ID, its bootstrap data reference) cannot be
	// preset for all of them.
	// +required
	// +kubebuilder:validation:XValidation:rule="!has(self.providerID)",message="providerID is written per machine by the bridge; a template cannot preset it"
	// +kubebuilder:validation:XValidation:rule="!has(self.parameters.host)",message="parameters.host names one existing host, and a template stamps out many machines: create each bring-your-own CrossplaneMachine and its Machine directly"
	// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || !has(self.bootstrap.dataSecretRef)",message="bootstrap.dataSecretRef is injected per machine by the bridge from its Machine's bootstrap data; a template cannot preset it"
	Spec CrossplaneMachineSpec `json:"spec"`
}

// CrossplaneMachineTemplateSpec is the desired state of a
// CrossplaneMachineTemplate.
type CrossplaneMachineTemplateSpec struct {
	// template of the CrossplaneMachine.
	// +required
	Template CrossplaneMachineTemplateResource `json:"template"`
}

// CrossplaneMachineTemplate is a template CAPI (MachineDeployment,
// MachineSet, control planes) clones into CrossplaneMachines. It is a plain
// CRD, not a composite resource. Templates are immutable (the bridge's
// template immutability policy refuses a changed spec, but for CAPI's
// topology dry-runs): roll machines by pointing the owner at a new template.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=crossplanemachinetemplates,scope=Namespaced,categories=cluster-api,shortName=xpmt
// +kubebuilder:printcolumn:name="Size",type="string",JSONPath=".spec.template.spec.parameters.size",description="Machine size"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"
type CrossplaneMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec CrossplaneMachineTemplateSpec `json:"spec"`
}

// CrossplaneMachineTemplateList is a list of CrossplaneMachineTemplates.
// +kubebuilder:object:root=true
type CrossplaneMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CrossplaneMachineTemplate `json:"items"`
}

// CrossplaneControlPlaneTemplateResource is what a
// CrossplaneControlPlaneTemplate stamps out.
type CrossplaneControlPlaneTemplateResource struct {
	// metadata of the created CrossplaneControlPlane.
	// +optional
	ObjectMeta TemplateObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec of the created CrossplaneControlPlane. The version is the
	// Cluster's (CAPI's topology controller writes it) and the endpoint the
	// service's (the bridge writes it): neither can be preset.
	// +required
	// +kubebuilder:validation:XValidation:rule="!has(self.version)",message="version is written by CAPI's topology controller from the Cluster's spec.topology.version; a template cannot preset it"
	// +kubebuilder:validation:XValidation:rule="!has(self.controlPlaneEndpoint)",message="controlPlaneEndpoint is written by the bridge from what the service serves; a template cannot preset it"
	Spec CrossplaneControlPlaneSpec `json:"spec"`
}

// CrossplaneControlPlaneTemplateSpec is the desired state of a
// CrossplaneControlPlaneTemplate.
type CrossplaneControlPlaneTemplateSpec struct {
	// template of the CrossplaneControlPlane.
	// +required
	Template CrossplaneControlPlaneTemplateResource `json:"template"`
}

// CrossplaneControlPlaneTemplate is a template CAPI's topology controller
// (ClusterClass spec.controlPlane) clones into CrossplaneControlPlanes: a
// managed control plane, with no machines of CAPI's. It is a plain CRD, not a
// composite resource, and immutable like the other templates.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=crossplanecontrolplanetemplates,scope=Namespaced,categories=cluster-api,shortName=xpcpt
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"
type CrossplaneControlPlaneTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec CrossplaneControlPlaneTemplateSpec `json:"spec"`
}

// CrossplaneControlPlaneTemplateList is a list of
// CrossplaneControlPlaneTemplates.
// +kubebuilder:object:root=true
type CrossplaneControlPlaneTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CrossplaneControlPlaneTemplate `json:"items"`
}

// CrossplaneMachinePoolTemplateResource is what a
// CrossplaneMachinePoolTemplate stamps out.
type CrossplaneMachinePoolTemplateResource struct {
	// metadata of the created CrossplaneMachinePool.
	// +optional
	ObjectMeta TemplateObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec of the created CrossplaneMachinePool. What the bridge writes per
	// pool (its machines' provider IDs, its bootstrap data reference) cannot
	// be preset.
	// +required
	// +kubebuilder:validation:XValidation:rule="!has(self.providerIDList)",message="providerIDList is written per pool by the bridge; a template cannot preset it"
	// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || !has(self.bootstrap.dataSecretRef)",message="bootstrap.dataSecretRef is injected per pool by the bridge from its MachinePool's bootstrap data; a template cannot preset it"
	Spec CrossplaneMachinePoolSpec `json:"spec"`
}

// CrossplaneMachinePoolTemplateSpec is the desired state of a
// CrossplaneMachinePoolTemplate.
type CrossplaneMachinePoolTemplateSpec struct {
	// template of the CrossplaneMachinePool.
	// +required
	Template CrossplaneMachinePoolTemplateResource `json:"template"`
}

// CrossplaneMachinePoolTemplate is a template CAPI's topology controller
// (ClusterClass spec.workers.machinePools) clones into
// CrossplaneMachinePools. It is a plain CRD, not a composite resource, and
// immutable like the other templates.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=crossplanemachinepooltemplates,scope=Namespaced,categories=cluster-api,shortName=xpmpt
// +kubebuilder:printcolumn:name="Size",type="string",JSONPath=".spec.template.spec.parameters.size",description="Machine size"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time since creation"
type CrossplaneMachinePoolTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec CrossplaneMachinePoolTemplateSpec `json:"spec"`
}

// CrossplaneMachinePoolTemplateList is a list of
// CrossplaneMachinePoolTemplates.
// +kubebuilder:object:root=true
type CrossplaneMachinePoolTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CrossplaneMachinePoolTemplate `json:"items"`
}

func init() {
	objectTypes = append(objectTypes,
		&CrossplaneClusterTemplate{}, &CrossplaneClusterTemplateList{},
		&CrossplaneMachineTemplate{}, &CrossplaneMachineTemplateList{},
		&CrossplaneControlPlaneTemplate{}, &CrossplaneControlPlaneTemplateList{},
		&CrossplaneMachinePoolTemplate{}, &CrossplaneMachinePoolTemplateList{},
	)
}
