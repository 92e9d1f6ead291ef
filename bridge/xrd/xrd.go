// Package xrd decides whether a CompositeResourceDefinition that declares a
// CAPI contract (label capxp.dev/contract) can implement it, and which kind
// the bridge then watches.
package xrd

import (
	"encoding/json"
	"fmt"
	"strings"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/cluster-api/util/contract"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// Adaptation is an XRD the bridge can adapt.
type Adaptation struct {
	// Contract is InfraCluster, InfraMachine or ControlPlane.
	Contract string
	// GVK is the XR kind to watch, at the XRD's referenceable version.
	GVK schema.GroupVersionKind
}

// Problem says why an XRD cannot be adapted.
type Problem struct {
	// Reason is a stable CamelCase reason.
	Reason string
	// Errors name the offending fields.
	Errors field.ErrorList
}

// Error renders the problem deterministically.
func (p *Problem) Error() string { return p.Errors.ToAggregate().Error() }

// A schemaField must exist in the XR schema with a type.
type schemaField struct {
	path string
	typ  string
}

// Required schema fields per contract: what CAPI reads and the bridge writes.
var required = map[string][]schemaField{
	infrav1.ContractInfraCluster: {
		{"spec.controlPlaneEndpoint.host", typeString},
		{"spec.controlPlaneEndpoint.port", "integer"},
		{"status.initialization.provisioned", typeBoolean},
		{"status.ready", typeBoolean},
	},
	infrav1.ContractInfraMachine: {
		{"spec.providerID", typeString},
		{"status.initialization.provisioned", typeBoolean},
		{"status.ready", typeBoolean},
	},
	infrav1.ContractInfraMachinePool: {
		{"spec.providerIDList", "array"},
		{"spec.replicas", "integer"},
		{"status.initialization.provisioned", typeBoolean},
		{"status.ready", typeBoolean},
		{"status.replicas", "integer"},
	},
	infrav1.ContractControlPlane: {
		{"spec.controlPlaneEndpoint.host", typeString},
		{"spec.controlPlaneEndpoint.port", "integer"},
		{"status.initialization.controlPlaneInitialized", typeBoolean},
		{"status.version", typeString},
		{"status.externalManagedControlPlane", typeBoolean},
	},
}

// Contracts are the contracts an XRD may declare, in the order they are
// listed to users.
var Contracts = []string{infrav1.ContractInfraCluster, infrav1.ContractInfraMachine, infrav1.ContractInfraMachinePool, infrav1.ContractControlPlane}

// Check decides whether an XRD can implement the contract its
// capxp.dev/contract label declares.
func Check(x *xpextv2.CompositeResourceDefinition) (*Adaptation, *Problem) {
	root := field.NewPath("spec")
	c := x.GetLabels()[infrav1.ContractLabel]
	if _, ok := required[c]; !ok {
		return nil, &Problem{Reason: infrav1.UnknownContractReason, Errors: field.ErrorList{field.NotSupported(
			field.NewPath("metadata", "labels").Key(infrav1.ContractLabel), c,
			Contracts)}}
	}
	if x.Spec.Scope != xpextv2.CompositeResourceScopeNamespaced {
		return nil, &Problem{Reason: infrav1.InvalidScopeReason, Errors: field.ErrorList{field.Invalid(root.Child("scope"), x.Spec.Scope,
			"must be Namespaced: CAPI's references are namespaced")}}
	}
	// The API server requires these; the check does not rely on it.
	var missing field.ErrorList
	if x.Spec.Group == "" {
		missing = append(missing, field.Required(root.Child("group"), "the XR kind's API group"))
	}
	if x.Spec.Names.Kind == "" {
		missing = append(missing, field.Required(root.Child("names", "kind"), "the XR kind"))
	}
	for i, v := range x.Spec.Versions {
		if v.Name == "" {
			missing = append(missing, field.Required(root.Child("versions").Index(i).Child("name"), "each version needs a name"))
		}
	}
	if len(missing) > 0 {
		return nil, &Problem{Reason: infrav1.InvalidNamesReason, Errors: missing}
	}
	// CAPI finds an infrastructure kind's CRD by a name it computes from the
	// kind; the XR's CRD has the XRD's name.
	if want := contract.CalculateCRDName(x.Spec.Group, x.Spec.Names.Kind); want != x.Spec.Names.Plural+"."+x.Spec.Group {
		return nil, &Problem{Reason: infrav1.InvalidNamesReason, Errors: field.ErrorList{field.Invalid(root.Child("names", "plural"), x.Spec.Names.Plural,
			fmt.Sprintf("must be %q: CAPI looks up the CRD %s", strings.TrimSuffix(want, "."+x.Spec.Group), want))}}
	}
	for i, v := range x.Spec.Versions {
		if !v.Referenceable {
			continue
		}
		path := root.Child("versions").Index(i).Child("schema", "openAPIV3Schema")
		if errs := checkSchema(v.Schema, path, c); len(errs) > 0 {
			return nil, &Problem{Reason: infrav1.MissingSchemaFieldReason, Errors: errs}
		}
		return &Adaptation{Contract: c, GVK: schema.GroupVersionKind{Group: x.Spec.Group, Version: v.Name, Kind: x.Spec.Names.Kind}}, nil
	}
	return nil, &Problem{Reason: infrav1.NoReferenceableVersionReason, Errors: field.ErrorList{field.Required(root.Child("versions"), "one version must be referenceable")}}
}

func checkSchema(v *xpextv2.CompositeResourceValidation, path *field.Path, c string) field.ErrorList {
	s := &extv1.JSONSchemaProps{}
	if v == nil || len(v.OpenAPIV3Schema.Raw) == 0 {
		return field.ErrorList{field.Required(path, "the contract fields must be declared")}
	}
	if err := json.Unmarshal(v.OpenAPIV3Schema.Raw, s); err != nil {
		return field.ErrorList{field.Invalid(path, "", "cannot parse: "+err.Error())}
	}
	var errs field.ErrorList
	for _, f := range required[c] {
		got, ok := lookup(s, f.path)
		switch {
		case !ok:
			errs = append(errs, field.Required(path.Child("properties").Key(f.path), fmt.Sprintf("CAPI's %s contract needs %s of type %s", c, f.path, f.typ)))
		case got.Type != f.typ:
			errs = append(errs, field.Invalid(path.Child("properties").Key(f.path), got.Type, "must be of type "+f.typ))
		}
	}
	return errs
}

// lookup walks a dotted path through a schema's properties.
func lookup(s *extv1.JSONSchemaProps, path string) (extv1.JSONSchemaProps, bool) {
	cur := *s
	for _, seg := range strings.Split(path, ".") {
		next, ok := cur.Properties[seg]
		if !ok {
			return extv1.JSONSchemaProps{}, false
		}
		cur = next
	}
	return cur, true
}
