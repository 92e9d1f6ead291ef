package gen

import (
	"encoding/json"
	"testing"

	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/crossplane/crossplane-runtime/v2/pkg/xcrd"
)

func crd(scope extv1.ResourceScope, spec, status extv1.JSONSchemaProps, required ...string) *extv1.CustomResourceDefinition {
	return &extv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.org"},
		Spec: extv1.CustomResourceDefinitionSpec{
			Group: "example.org",
			Names: extv1.CustomResourceDefinitionNames{Kind: "Widget", ListKind: "WidgetList", Plural: "widgets", Singular: "widget"},
			Scope: scope,
			Versions: []extv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &extv1.CustomResourceValidation{OpenAPIV3Schema: &extv1.JSONSchemaProps{
					Type:     "object",
					Required: required,
					Properties: map[string]extv1.JSONSchemaProps{
						"apiVersion": {Type: "string"},
						"metadata":   {Type: "object"},
						"spec":       spec,
						"status":     status,
					},
				}},
				AdditionalPrinterColumns: []extv1.CustomResourceColumnDefinition{{Name: "Size", Type: "string", JSONPath: ".spec.size"}},
			}},
		},
	}
}

func obj(props map[string]extv1.JSONSchemaProps) extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{Type: "object", Properties: props}
}

var str = extv1.JSONSchemaProps{Type: "string"}

// contractLabels are the labels of a CAPXP XRD that implements contract:
// not clusterctl's provider label, which would have clusterctl upgrade
// delete it.
func contractLabels(contract string) map[string]string {
	return map[string]string{
		"capxp.dev/contract":          contract,
		"cluster.x-k8s.io/v1beta2":    "v1alpha1",
		"clusterctl.cluster.x-k8s.io": "",
	}
}

func TestXRD(t *testing.T) {
	type want struct {
		labels map[string]string
		schema *extv1.JSONSchemaProps
		// updatePolicy is the XRD's defaultCompositionUpdatePolicy.
		updatePolicy *xpv2.UpdatePolicy
		err          bool
	}
	cases := map[string]struct {
		reason   string
		crd      *extv1.CustomResourceDefinition
		contract string
		want     want
	}{
		"StripsWhatCrossplaneOwns": {
			reason:   "spec.crossplane and status.conditions are added by Crossplane; the XRD must not declare them",
			crd:      crd(extv1.NamespaceScoped, obj(map[string]extv1.JSONSchemaProps{"size": str, "crossplane": obj(nil)}), obj(map[string]extv1.JSONSchemaProps{"ready": {Type: "boolean"}, "conditions": {Type: "array"}}), "spec"),
			contract: "InfraMachine",
			want: want{
				labels: contractLabels("InfraMachine"),
				schema: &extv1.JSONSchemaProps{
					Type:     "object",
					Required: []string{"spec"},
					Properties: map[string]extv1.JSONSchemaProps{
						"spec":   obj(map[string]extv1.JSONSchemaProps{"size": str}),
						"status": obj(map[string]extv1.JSONSchemaProps{"ready": {Type: "boolean"}}),
					},
				},
				updatePolicy: ptr.To(xpv2.UpdateManual),
			},
		},
		"ClusterFollowsItsComposition": {
			reason:   "a cluster XR takes a new revision of its Composition; only machines are pinned to theirs",
			crd:      crd(extv1.NamespaceScoped, obj(map[string]extv1.JSONSchemaProps{"region": str}), obj(nil), "spec"),
			contract: "InfraCluster",
			want: want{
				labels: contractLabels("InfraCluster"),
				schema: &extv1.JSONSchemaProps{
					Type:     "object",
					Required: []string{"spec"},
					Properties: map[string]extv1.JSONSchemaProps{
						"spec":   obj(map[string]extv1.JSONSchemaProps{"region": str}),
						"status": obj(nil),
					},
				},
			},
		},
		"ClusterScopedRefused": {
			reason:   "CAPI's infrastructureRef is namespaced, so a cluster-scoped XR cannot implement the contract",
			crd:      crd(extv1.ClusterScoped, obj(nil), obj(nil)),
			contract: "InfraCluster",
			want:     want{err: true},
		},
		"NoSpecRefused": {
			reason: "Crossplane requires a spec on every XR",
			crd: func() *extv1.CustomResourceDefinition {
				c := crd(extv1.NamespaceScoped, obj(nil), obj(nil))
				delete(c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties, "spec")
				return c
			}(),
			contract: "InfraCluster",
			want:     want{err: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			xrd, err := XRD(tc.crd, tc.contract)
			if tc.want.err {
				if err == nil {
					t.Fatalf("%s\nXRD(...): want an error, got none", tc.reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nXRD(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.labels, xrd.Labels); diff != "" {
				t.Errorf("%s\nXRD(...) labels: -want, +got:\n%s", tc.reason, diff)
			}
			got := &extv1.JSONSchemaProps{}
			if err := json.Unmarshal(xrd.Spec.Versions[0].Schema.OpenAPIV3Schema.Raw, got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want.schema, got); diff != "" {
				t.Errorf("%s\nXRD(...) schema: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.updatePolicy, xrd.Spec.DefaultCompositionUpdatePolicy); diff != "" {
				t.Errorf("%s\nXRD(...) defaultCompositionUpdatePolicy: -want, +got:\n%s", tc.reason, diff)
			}
			if !xrd.Spec.Versions[0].Referenceable || xrd.Spec.Scope != "Namespaced" {
				t.Errorf("%s\nXRD(...): want a referenceable, namespaced version", tc.reason)
			}
			if diff := cmp.Diff(tc.crd.Spec.Versions[0].AdditionalPrinterColumns, xrd.Spec.Versions[0].AdditionalPrinterColumns); diff != "" {
				t.Errorf("%s\nXRD(...) printer columns: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// Crossplane generates the XR's CRD from the XRD: the contract labels must
// reach it, and Crossplane's own fields come back under spec.crossplane and
// status.conditions.
func TestXRDSurvivesCrossplaneCRDGeneration(t *testing.T) {
	in := crd(extv1.NamespaceScoped, obj(map[string]extv1.JSONSchemaProps{"size": str}), obj(nil), "spec")
	xrd, err := XRD(in, "InfraCluster")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(xrd)
	if err != nil {
		t.Fatal(err)
	}
	v1 := &xpextv1.CompositeResourceDefinition{}
	if err := json.Unmarshal(raw, v1); err != nil {
		t.Fatal(err)
	}
	out, err := xcrd.ForCompositeResource(v1)
	if err != nil {
		t.Fatalf("xcrd.ForCompositeResource: %v", err)
	}
	if diff := cmp.Diff(xrd.Labels, out.Labels); diff != "" {
		t.Errorf("CRD labels: -want (XRD's), +got:\n%s", diff)
	}
	if out.Spec.Scope != extv1.NamespaceScoped {
		t.Errorf("CRD scope: want Namespaced, got %s", out.Spec.Scope)
	}
	s := out.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, p := range []string{"size", "crossplane"} {
		if _, ok := s.Properties["spec"].Properties[p]; !ok {
			t.Errorf("CRD schema: want spec.%s", p)
		}
	}
	if _, ok := s.Properties["status"].Properties["conditions"]; !ok {
		t.Errorf("CRD schema: want status.conditions")
	}
}

func TestLabelCRD(t *testing.T) {
	in := crd(extv1.NamespaceScoped, obj(nil), obj(nil))
	in.Labels = map[string]string{"keep": "me"}
	got := LabelCRD(in)
	want := map[string]string{
		"keep":                        "me",
		"cluster.x-k8s.io/v1beta2":    "v1alpha1",
		"cluster.x-k8s.io/provider":   "infrastructure-crossplane",
		"clusterctl.cluster.x-k8s.io": "",
	}
	if diff := cmp.Diff(want, got.Labels); diff != "" {
		t.Errorf("LabelCRD(...): -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"keep": "me"}, in.Labels); diff != "" {
		t.Errorf("LabelCRD(...) changed its input: -want, +got:\n%s", diff)
	}
}

func TestTemplateCRD(t *testing.T) {
	spec := obj(map[string]extv1.JSONSchemaProps{"template": obj(map[string]extv1.JSONSchemaProps{
		"spec": obj(map[string]extv1.JSONSchemaProps{"size": str}),
	})})
	spec.XValidations = extv1.ValidationRules{{Rule: "self == oldSelf"}, {Rule: "has(self.template)"}}
	in := crd(extv1.NamespaceScoped, spec, obj(nil))
	got := TemplateCRD(in)
	s := got.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	if diff := cmp.Diff(extv1.ValidationRules{{Rule: "has(self.template)"}}, s.XValidations); diff != "" {
		t.Errorf("TemplateCRD(...): spec rules: -want, +got:\n%s", diff)
	}
	if _, ok := got.Labels["clusterctl.cluster.x-k8s.io"]; !ok {
		t.Errorf("TemplateCRD(...): labels %v, want the contract labels", got.Labels)
	}
	if n := len(in.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].XValidations); n != 2 {
		t.Errorf("TemplateCRD(...) changed its input: %d spec rules, want 2", n)
	}
}
