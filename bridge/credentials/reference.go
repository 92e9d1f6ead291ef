package credentials

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// ReferenceOf reads the credentials an XR names, its
// spec.providerConfigRef, from the object as unstructured; nil when unset.
func ReferenceOf(xr map[string]any) *infrav1.ProviderConfigReference {
	m, ok, _ := unstructured.NestedFieldNoCopy(xr, "spec", "providerConfigRef")
	fields, _ := m.(map[string]any)
	if !ok || fields == nil {
		return nil
	}
	ref := &infrav1.ProviderConfigReference{}
	ref.APIGroup, _ = fields["apiGroup"].(string)
	kind, _ := fields["kind"].(string)
	ref.Kind = infrav1.ProviderConfigKind(kind)
	ref.Name, _ = fields["name"].(string)
	if ref.Name == "" {
		return nil
	}
	return ref
}
