package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of CAPXP's contract types.
	GroupVersion = schema.GroupVersion{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1"}

	// schemeBuilder registers the types of this package.
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = schemeBuilder.AddToScheme

	objectTypes = []runtime.Object{}
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, objectTypes...)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}

// Kinds of this group, as CAPI's infrastructureRef and controlPlaneRef name
// them.
const (
	CrossplaneClusterKind          = "CrossplaneCluster"
	CrossplaneMachineKind          = "CrossplaneMachine"
	CrossplaneControlPlaneKind     = "CrossplaneControlPlane"
	CrossplaneMachinePoolKind      = "CrossplaneMachinePool"
	CrossplaneClusterTemplateKind  = "CrossplaneClusterTemplate"
	CrossplaneMachineTemplateKind  = "CrossplaneMachineTemplate"
	ClusterProviderConfigGrantKind = "ClusterProviderConfigGrant"

	CrossplaneControlPlaneTemplateKind = "CrossplaneControlPlaneTemplate"
	CrossplaneMachinePoolTemplateKind  = "CrossplaneMachinePoolTemplate"
)
