package xrd

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cluster-api/util/contract"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// OpenAPI types of the template's schema.
const (
	typeObject  = "object"
	typeString  = "string"
	typeBoolean = "boolean"
)

// TemplateKind is the template kind of an XR kind: CAPI clones a
// <Kind>Template of the same group and version into a <Kind>.
func TemplateKind(kind string) string { return kind + "Template" }

// TemplateCRD is the CRD of the template kind that CAPI (MachineDeployments,
// MachineSets, control planes, ClusterClass) clones into XRs of an XRD that
// declares a contract: CAPI's InfraClusterTemplate or InfraMachineTemplate.
//
// The template is a plain CRD in the XRD's group, with the XRD's served
// versions, its storage version the referenceable one. Its
// spec.template.spec is the XR's spec schema plus spec.crossplane (the
// Composition selection Crossplane adds to every XR; crossplane is its
// schema, from CAPXP's own templates) without its transition rules. Like
// CAPXP's own templates it is immutable (the bridge's template immutability
// policy, not its schema, sees to that), a machine template cannot preset
// what the bridge writes per machine, and it carries the labels by which CAPI resolves its contract
// version and clusterctl finds and moves it.
func TemplateCRD(x *xpextv2.CompositeResourceDefinition, crossplane extv1.JSONSchemaProps) (*extv1.CustomResourceDefinition, error) {
	a, p := Check(x)
	if p != nil {
		return nil, fmt.Errorf("XRD %s cannot implement a CAPI contract: %w", x.Name, p)
	}
	kind := TemplateKind(x.Spec.Names.Kind)
	plural := TemplateResource(x).Resource
	crd := &extv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{APIVersion: extv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{
			Name: plural + "." + x.Spec.Group,
			Labels: map[string]string{
				infrav1.CAPIContractLabel: a.GVK.Version,
				infrav1.ClusterctlLabel:   "",
			},
			Annotations: map[string]string{
				XRDAnnotation: x.Name,
			},
		},
		Spec: extv1.CustomResourceDefinitionSpec{
			Group: x.Spec.Group,
			Scope: extv1.NamespaceScoped,
			Names: extv1.CustomResourceDefinitionNames{
				Kind:       kind,
				ListKind:   kind + "List",
				Plural:     plural,
				Singular:   strings.ToLower(kind),
				Categories: templateCategories(x.Spec.Names.Categories),
			},
		},
	}
	for i, v := range x.Spec.Versions {
		if !v.Served {
			continue
		}
		spec, err := xrSpec(v.Schema)
		if err != nil {
			return nil, fmt.Errorf("XRD %s: spec.versions[%d] (%s): %w", x.Name, i, v.Name, err)
		}
		if spec.Properties == nil {
			spec.Properties = map[string]extv1.JSONSchemaProps{}
		}
		spec.Properties["crossplane"] = crossplane
		WithoutTransitionRules(&spec)
		switch a.Contract {
		case infrav1.ContractInfraMachine:
			spec.XValidations = append(spec.XValidations,
				extv1.ValidationRule{Rule: "!has(self.providerID)", Message: "providerID is written per machine by the bridge; a template cannot preset it"})
		case infrav1.ContractInfraMachinePool:
			spec.XValidations = append(spec.XValidations,
				extv1.ValidationRule{Rule: "!has(self.providerIDList)", Message: "providerIDList is written per pool by the bridge; a template cannot preset it"})
		case infrav1.ContractControlPlane:
			spec.XValidations = append(spec.XValidations,
				extv1.ValidationRule{Rule: "!has(self.controlPlaneEndpoint)", Message: "controlPlaneEndpoint is written per control plane by the bridge from its service's endpoint; a template cannot preset it"})
			// CAPI's topology controller writes the Cluster's version, where
			// the kind has one: a template neither requires nor defaults it
			// (either would make every template invalid).
			if version, ok := spec.Properties["version"]; ok {
				version.Default = nil
				spec.Properties["version"] = version
				spec.Required = slices.DeleteFunc(slices.Clone(spec.Required), func(f string) bool { return f == "version" })
				spec.XValidations = append(spec.XValidations,
					extv1.ValidationRule{Rule: "!has(self.version)", Message: "version is written by CAPI's topology controller from the Cluster's spec.topology.version; a template cannot preset it"})
			}
		}
		crd.Spec.Versions = append(crd.Spec.Versions, extv1.CustomResourceDefinitionVersion{
			Name:       v.Name,
			Served:     true,
			Storage:    v.Name == a.GVK.Version,
			Deprecated: v.Deprecated != nil && *v.Deprecated,
			Schema:     &extv1.CustomResourceValidation{OpenAPIV3Schema: templateSchema(kind, x.Spec.Names.Kind, spec)},
			AdditionalPrinterColumns: []extv1.CustomResourceColumnDefinition{
				{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp", Description: "Time since creation"},
			},
		})
	}
	return crd, nil
}

// TemplateResource is the resource of an XRD's template kind, in the XRD's
// group, named as CAPI computes it.
func TemplateResource(x *xpextv2.CompositeResourceDefinition) schema.GroupResource {
	kind := TemplateKind(x.Spec.Names.Kind)
	return schema.GroupResource{Group: x.Spec.Group, Resource: strings.TrimSuffix(contract.CalculateCRDName(x.Spec.Group, kind), "."+x.Spec.Group)}
}

// XRDAnnotation, on what `capxp xrd adopt` generates (a template CRD,
// ClusterRoles), names the XRD it was generated from.
const XRDAnnotation = "capxp.dev/xrd"

// xrSpec is the spec schema of an XRD version.
func xrSpec(v *xpextv2.CompositeResourceValidation) (extv1.JSONSchemaProps, error) {
	s := extv1.JSONSchemaProps{}
	if v == nil || len(v.OpenAPIV3Schema.Raw) == 0 {
		return s, fmt.Errorf("no schema")
	}
	if err := json.Unmarshal(v.OpenAPIV3Schema.Raw, &s); err != nil {
		return s, fmt.Errorf("cannot parse the schema: %w", err)
	}
	spec, ok := s.Properties["spec"]
	if !ok {
		return s, fmt.Errorf("the schema has no spec")
	}
	return spec, nil
}

// templateSchema wraps an XR's spec schema as a template's.
func templateSchema(kind, xrKind string, spec extv1.JSONSchemaProps) *extv1.JSONSchemaProps {
	stringMap := extv1.JSONSchemaProps{Type: typeObject, AdditionalProperties: &extv1.JSONSchemaPropsOrBool{Allows: true, Schema: &extv1.JSONSchemaProps{Type: typeString}}}
	return &extv1.JSONSchemaProps{
		Type:        typeObject,
		Description: fmt.Sprintf("%s is a template CAPI clones into %ss. It is a plain CRD, not a composite resource, generated by capxp from the XRD. Templates are immutable: create a new one to change what is cloned.", kind, xrKind),
		Properties: map[string]extv1.JSONSchemaProps{
			"apiVersion": {Type: typeString},
			"kind":       {Type: typeString},
			"metadata":   {Type: typeObject},
			"spec": {
				Type:     typeObject,
				Required: []string{"template"},
				Properties: map[string]extv1.JSONSchemaProps{
					"template": {
						Type:        typeObject,
						Description: fmt.Sprintf("template of the %s.", xrKind),
						Required:    []string{"spec"},
						Properties: map[string]extv1.JSONSchemaProps{
							"metadata": {
								Type:        typeObject,
								Description: fmt.Sprintf("metadata to put on the created %s.", xrKind),
								Properties:  map[string]extv1.JSONSchemaProps{"labels": stringMap, "annotations": stringMap},
							},
							"spec": spec,
						},
					},
				},
			},
		},
	}
}

// templateCategories adds cluster-api to the XRD's categories.
func templateCategories(in []string) []string {
	out := append([]string{}, in...)
	for _, c := range out {
		if c == "cluster-api" {
			sort.Strings(out)
			return out
		}
	}
	out = append(out, "cluster-api")
	sort.Strings(out)
	return out
}
