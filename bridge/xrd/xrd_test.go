package xrd

import (
	"encoding/json"
	"strings"
	"testing"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	"github.com/google/go-cmp/cmp"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

func props(kv map[string]extv1.JSONSchemaProps) extv1.JSONSchemaProps {
	return extv1.JSONSchemaProps{Type: "object", Properties: kv}
}

var clusterSchema = props(map[string]extv1.JSONSchemaProps{
	"spec": props(map[string]extv1.JSONSchemaProps{
		"controlPlaneEndpoint": props(map[string]extv1.JSONSchemaProps{"host": {Type: "string"}, "port": {Type: "integer"}}),
	}),
	"status": props(map[string]extv1.JSONSchemaProps{
		"initialization": props(map[string]extv1.JSONSchemaProps{"provisioned": {Type: "boolean"}}),
		"ready":          {Type: "boolean"},
	}),
})

var controlPlaneSchema = props(map[string]extv1.JSONSchemaProps{
	"spec": props(map[string]extv1.JSONSchemaProps{
		"controlPlaneEndpoint": props(map[string]extv1.JSONSchemaProps{"host": {Type: "string"}, "port": {Type: "integer"}}),
	}),
	"status": props(map[string]extv1.JSONSchemaProps{
		"initialization":              props(map[string]extv1.JSONSchemaProps{"controlPlaneInitialized": {Type: "boolean"}}),
		"version":                     {Type: "string"},
		"externalManagedControlPlane": {Type: "boolean"},
	}),
})

var poolSchema = props(map[string]extv1.JSONSchemaProps{
	"spec": props(map[string]extv1.JSONSchemaProps{
		"providerIDList": {Type: "array", Items: &extv1.JSONSchemaPropsOrArray{Schema: &extv1.JSONSchemaProps{Type: "string"}}},
		"replicas":       {Type: "integer"},
	}),
	"status": props(map[string]extv1.JSONSchemaProps{
		"initialization": props(map[string]extv1.JSONSchemaProps{"provisioned": {Type: "boolean"}}),
		"ready":          {Type: "boolean"},
		"replicas":       {Type: "integer"},
	}),
})

// withoutStatusReplicas is s without status.replicas.
func withoutStatusReplicas(s extv1.JSONSchemaProps) extv1.JSONSchemaProps {
	out := *s.DeepCopy()
	delete(out.Properties["status"].Properties, "replicas")
	return out
}

type mod func(*xpextv2.CompositeResourceDefinition)

func xrd(contract string, s extv1.JSONSchemaProps, mods ...mod) *xpextv2.CompositeResourceDefinition {
	raw, err := json.Marshal(s)
	if err != nil {
		panic(err) // the tests' own literals
	}
	x := &xpextv2.CompositeResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "eksclusters.platform.example.org", Labels: map[string]string{"capxp.dev/contract": contract}},
		Spec: xpextv2.CompositeResourceDefinitionSpec{
			Group: "platform.example.org",
			Names: extv1.CustomResourceDefinitionNames{Kind: "EKSCluster", Plural: "eksclusters"},
			Scope: xpextv2.CompositeResourceScopeNamespaced,
			Versions: []xpextv2.CompositeResourceDefinitionVersion{
				{Name: "v1alpha1", Served: true},
				{Name: "v1beta1", Served: true, Referenceable: true, Schema: &xpextv2.CompositeResourceValidation{OpenAPIV3Schema: runtime.RawExtension{Raw: raw}}},
			},
		},
	}
	for _, m := range mods {
		m(x)
	}
	return x
}

func TestCheck(t *testing.T) {
	type want struct {
		a      *Adaptation
		reason string
		err    string
	}
	cases := map[string]struct {
		reason string
		xrd    *xpextv2.CompositeResourceDefinition
		want   want
	}{
		"ForeignInfraCluster": {
			reason: "a platform team's own XRD of another group and kind is adapted at its referenceable version",
			xrd:    xrd("InfraCluster", clusterSchema),
			want: want{a: &Adaptation{Contract: "InfraCluster", GVK: schema.GroupVersionKind{
				Group: "platform.example.org", Version: "v1beta1", Kind: "EKSCluster",
			}}},
		},
		"ForeignControlPlane": {
			reason: "a platform team's managed control plane XRD is adapted to the ControlPlane contract",
			xrd:    xrd("ControlPlane", controlPlaneSchema),
			want: want{a: &Adaptation{Contract: "ControlPlane", GVK: schema.GroupVersionKind{
				Group: "platform.example.org", Version: "v1beta1", Kind: "EKSCluster",
			}}},
		},
		"ForeignMachinePool": {
			reason: "a platform team's auto scaling group XRD is adapted to the InfraMachinePool contract",
			xrd:    xrd("InfraMachinePool", poolSchema),
			want: want{a: &Adaptation{Contract: "InfraMachinePool", GVK: schema.GroupVersionKind{
				Group: "platform.example.org", Version: "v1beta1", Kind: "EKSCluster"}}},
		},
		"MachinePoolWithoutReplicas": {
			reason: "CAPI reads a pool's status.replicas: an XRD without it cannot implement InfraMachinePool",
			xrd:    xrd("InfraMachinePool", withoutStatusReplicas(poolSchema)),
			want:   want{reason: infrav1.MissingSchemaFieldReason, err: "CAPI's InfraMachinePool contract needs status.replicas of type integer"},
		},
		"ControlPlaneWithoutVersion": {
			reason: "CAPI reads a control plane's status.version: an XRD without it cannot implement ControlPlane",
			xrd:    xrd("ControlPlane", clusterSchema),
			want:   want{reason: infrav1.MissingSchemaFieldReason, err: "CAPI's ControlPlane contract needs status.version of type string"},
		},
		"UnknownContract": {
			reason: "only the four contracts exist",
			xrd:    xrd("InfraWidget", clusterSchema),
			want:   want{reason: infrav1.UnknownContractReason, err: `metadata.labels[capxp.dev/contract]: Unsupported value: "InfraWidget": supported values: "InfraCluster", "InfraMachine", "InfraMachinePool", "ControlPlane"`},
		},
		"ClusterScoped": {
			reason: "CAPI's references are namespaced",
			xrd:    xrd("InfraCluster", clusterSchema, func(x *xpextv2.CompositeResourceDefinition) { x.Spec.Scope = xpextv2.CompositeResourceScopeCluster }),
			want:   want{reason: infrav1.InvalidScopeReason, err: `spec.scope: Invalid value: "Cluster": must be Namespaced: CAPI's references are namespaced`},
		},
		"PluralCAPICannotFind": {
			reason: "CAPI computes the CRD name from the kind; another plural is never found",
			xrd: xrd("InfraCluster", clusterSchema, func(x *xpextv2.CompositeResourceDefinition) {
				x.Spec.Names.Plural = "ekss"
			}),
			want: want{reason: infrav1.InvalidNamesReason, err: `spec.names.plural: Invalid value: "ekss": must be "eksclusters": CAPI looks up the CRD eksclusters.platform.example.org`},
		},
		"NoGroupKindOrVersionName": {
			reason: "an XRD without a group, a kind or a version name names no kind CAPI can reference",
			xrd: xrd("InfraCluster", clusterSchema, func(x *xpextv2.CompositeResourceDefinition) {
				x.Spec.Group, x.Spec.Names.Kind, x.Spec.Versions[0].Name = "", "", ""
			}),
			want: want{reason: infrav1.InvalidNamesReason, err: `[spec.group: Required value: the XR kind's API group, spec.names.kind: Required value: the XR kind, spec.versions[0].name: Required value: each version needs a name]`},
		},
		"MissingContractFields": {
			reason: "the XR must be able to hold what CAPI reads and the bridge writes",
			xrd: xrd("InfraCluster", props(map[string]extv1.JSONSchemaProps{
				"spec": props(map[string]extv1.JSONSchemaProps{
					"controlPlaneEndpoint": props(map[string]extv1.JSONSchemaProps{"host": {Type: "string"}, "port": {Type: "string"}}),
				}),
			})),
			want: want{reason: infrav1.MissingSchemaFieldReason, err: "spec.versions[1].schema.openAPIV3Schema.properties[spec.controlPlaneEndpoint.port]: Invalid value: \"string\": must be of type integer"},
		},
		"InfraMachineNeedsProviderID": {
			reason: "a machine XRD without spec.providerID cannot implement InfraMachine",
			xrd:    xrd("InfraMachine", clusterSchema),
			want:   want{reason: infrav1.MissingSchemaFieldReason, err: "properties[spec.providerID]: Required value: CAPI's InfraMachine contract needs spec.providerID of type string"},
		},
		"NoReferenceableVersion": {
			reason: "CAPI needs one version to read",
			xrd: xrd("InfraCluster", clusterSchema, func(x *xpextv2.CompositeResourceDefinition) {
				x.Spec.Versions = x.Spec.Versions[:1]
			}),
			want: want{reason: infrav1.NoReferenceableVersionReason, err: "spec.versions: Required value: one version must be referenceable"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a, p := Check(tc.xrd)
			if diff := cmp.Diff(tc.want.a, a); diff != "" {
				t.Errorf("%s\nCheck(...): -want, +got:\n%s", tc.reason, diff)
			}
			if tc.want.reason == "" {
				if p != nil {
					t.Errorf("%s\nCheck(...): unexpected problem %v", tc.reason, p)
				}
				return
			}
			if p == nil {
				t.Fatalf("%s\nCheck(...): want problem %s, got none", tc.reason, tc.want.reason)
			}
			if p.Reason != tc.want.reason {
				t.Errorf("%s\nCheck(...) reason: want %s, got %s", tc.reason, tc.want.reason, p.Reason)
			}
			if got := p.Error(); !strings.Contains(got, tc.want.err) {
				t.Errorf("%s\nCheck(...) error: want it to contain %q, got %q", tc.reason, tc.want.err, got)
			}
		})
	}
}
