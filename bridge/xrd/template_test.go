package xrd

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	"github.com/google/go-cmp/cmp"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

var machineSchema = props(map[string]extv1.JSONSchemaProps{
	"spec": withRules(props(map[string]extv1.JSONSchemaProps{
		"providerID": {Type: "string"},
		"parameters": withRules(props(map[string]extv1.JSONSchemaProps{"flavor": {Type: "string"}}), "self == oldSelf"),
	}), "has(self.parameters)", "!has(oldSelf.providerID) || self.providerID == oldSelf.providerID"),
	"status": props(map[string]extv1.JSONSchemaProps{
		"initialization": props(map[string]extv1.JSONSchemaProps{"provisioned": {Type: "boolean"}}),
		"ready":          {Type: "boolean"},
	}),
})

var versionedControlPlaneSchema = func() extv1.JSONSchemaProps {
	s := *controlPlaneSchema.DeepCopy()
	spec := s.Properties["spec"]
	spec.Properties["version"] = extv1.JSONSchemaProps{Type: "string", Default: &extv1.JSON{Raw: []byte(`"v1.36.5"`)}}
	spec.Required = append(spec.Required, "version")
	s.Properties["spec"] = spec
	return s
}()

var crossplaneSchema = props(map[string]extv1.JSONSchemaProps{"compositionRef": props(map[string]extv1.JSONSchemaProps{"name": {Type: "string"}})})

// withRules adds validation rules to a schema.
func withRules(s extv1.JSONSchemaProps, rules ...string) extv1.JSONSchemaProps {
	for _, r := range rules {
		s.XValidations = append(s.XValidations, extv1.ValidationRule{Rule: r})
	}
	return s
}

// withSchemas gives every version of the XRD the schema s.
func withSchemas(s extv1.JSONSchemaProps) mod {
	return func(x *xpextv2.CompositeResourceDefinition) {
		raw, _ := json.Marshal(s)
		for i := range x.Spec.Versions {
			x.Spec.Versions[i].Schema = &xpextv2.CompositeResourceValidation{OpenAPIV3Schema: runtime.RawExtension{Raw: raw}}
		}
	}
}

func asMachine(x *xpextv2.CompositeResourceDefinition) {
	x.Name = "vms.platform.example.org"
	x.Spec.Names.Kind, x.Spec.Names.Plural = "VM", "vms"
}

func TestTemplateCRD(t *testing.T) {
	cases := map[string]struct {
		reason string
		xrd    *xpextv2.CompositeResourceDefinition
		// name, kind and storage version of the template CRD; its spec's
		// rules; or the error's words.
		name, kind, storage string
		rules               []string
		err                 []string
	}{
		"InfraCluster": {
			reason:  "a cluster XRD gets <Kind>Template in its group, named as CAPI computes it, stored at the referenceable version",
			xrd:     xrd(infrav1.ContractInfraCluster, clusterSchema, withSchemas(clusterSchema)),
			name:    "eksclustertemplates.platform.example.org",
			kind:    "EKSClusterTemplate",
			storage: "v1beta1",
		},
		"InfraMachine": {
			reason:  "a machine template cannot preset the providerID the bridge writes per machine, and keeps the XR's rules but those guarding an XR's own updates",
			xrd:     xrd(infrav1.ContractInfraMachine, machineSchema, withSchemas(machineSchema), asMachine),
			name:    "vmtemplates.platform.example.org",
			kind:    "VMTemplate",
			storage: "v1beta1",
			rules:   []string{"has(self.parameters)", "!has(self.providerID)"},
		},
		"ControlPlane": {
			reason:  "a managed control plane template cannot preset the endpoint the bridge writes per control plane",
			xrd:     xrd(infrav1.ContractControlPlane, controlPlaneSchema, withSchemas(controlPlaneSchema)),
			name:    "eksclustertemplates.platform.example.org",
			kind:    "EKSClusterTemplate",
			storage: "v1beta1",
			rules:   []string{"!has(self.controlPlaneEndpoint)"},
		},
		"ControlPlaneWithVersion": {
			reason:  "nor the version CAPI's topology controller writes, where the kind has one: neither required nor defaulted in the template",
			xrd:     xrd(infrav1.ContractControlPlane, versionedControlPlaneSchema, withSchemas(versionedControlPlaneSchema)),
			name:    "eksclustertemplates.platform.example.org",
			kind:    "EKSClusterTemplate",
			storage: "v1beta1",
			rules:   []string{"!has(self.controlPlaneEndpoint)", "!has(self.version)"},
		},
		"MachinePool": {
			reason:  "a machine pool template cannot preset the providerIDList the bridge writes per pool",
			xrd:     xrd(infrav1.ContractInfraMachinePool, poolSchema, withSchemas(poolSchema)),
			name:    "eksclustertemplates.platform.example.org",
			kind:    "EKSClusterTemplate",
			storage: "v1beta1",
			rules:   []string{"!has(self.providerIDList)"},
		},
		"NoContract": {
			reason: "only an XRD that declares a contract has a template",
			xrd:    xrd("", clusterSchema, withSchemas(clusterSchema)),
			err:    []string{"eksclusters.platform.example.org", "capxp.dev/contract"},
		},
		"ServedVersionWithoutSchema": {
			reason: "every served version needs a schema to template",
			xrd:    xrd(infrav1.ContractInfraCluster, clusterSchema),
			err:    []string{"spec.versions[0] (v1alpha1)", "no schema"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			crd, err := TemplateCRD(tc.xrd, crossplaneSchema)
			if len(tc.err) > 0 {
				if err == nil {
					t.Fatalf("%s\nTemplateCRD(...): no error, want one saying %q", tc.reason, tc.err)
				}
				for _, w := range tc.err {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s\nTemplateCRD(...): %v, want it to say %q", tc.reason, err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nTemplateCRD(...): %v", tc.reason, err)
			}
			if crd.Name != tc.name || crd.Spec.Names.Kind != tc.kind || crd.Spec.Group != tc.xrd.Spec.Group || crd.Spec.Scope != extv1.NamespaceScoped {
				t.Errorf("%s\nTemplateCRD(...): %s, kind %s in %s (%s), want %s, kind %s", tc.reason, crd.Name, crd.Spec.Names.Kind, crd.Spec.Group, crd.Spec.Scope, tc.name, tc.kind)
			}
			wantLabels := map[string]string{infrav1.CAPIContractLabel: tc.storage, infrav1.ClusterctlLabel: ""}
			if diff := cmp.Diff(wantLabels, crd.Labels); diff != "" {
				t.Errorf("%s\nlabels: -want, +got:\n%s", tc.reason, diff)
			}
			if len(crd.Spec.Versions) != len(tc.xrd.Spec.Versions) {
				t.Fatalf("%s\n%d versions, want %d", tc.reason, len(crd.Spec.Versions), len(tc.xrd.Spec.Versions))
			}
			for _, v := range crd.Spec.Versions {
				if v.Storage != (v.Name == tc.storage) {
					t.Errorf("%s\nversion %s: storage %t", tc.reason, v.Name, v.Storage)
				}
				s := v.Schema.OpenAPIV3Schema.Properties["spec"]
				if len(s.XValidations) != 0 {
					t.Errorf("%s\nversion %s: spec rules %v, want none: the template immutability policy judges updates, so that CAPI can dry-run them", tc.reason, v.Name, s.XValidations)
				}
				ts := s.Properties["template"].Properties["spec"]
				if r := ts.Properties["parameters"].XValidations; len(r) != 0 {
					t.Errorf("%s\nversion %s: template parameters rules %v, want none", tc.reason, v.Name, r)
				}
				if _, ok := ts.Properties["crossplane"]; !ok {
					t.Errorf("%s\nversion %s: the template's spec has no crossplane to select a Composition with", tc.reason, v.Name)
				}
				var rules []string
				for _, r := range ts.XValidations {
					rules = append(rules, r.Rule)
				}
				if diff := cmp.Diff(tc.rules, rules); diff != "" {
					t.Errorf("%s\nversion %s: template spec rules: -want, +got:\n%s", tc.reason, v.Name, diff)
				}
				if slices.Contains(rules, "!has(self.version)") && (ts.Properties["version"].Default != nil || slices.Contains(ts.Required, "version")) {
					t.Errorf("%s\nversion %s: the template forbids a version it requires or defaults", tc.reason, v.Name)
				}
			}
		})
	}
}
