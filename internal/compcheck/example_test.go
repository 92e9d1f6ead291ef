package compcheck

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capxp/cluster-api-provider-crossplane/compositions"
)

func TestExampleFromXRD(t *testing.T) {
	cases := map[string]struct {
		reason    string
		xrd, comp string
		want      map[string]any
		absent    [][]string
		namespace string
	}{
		"Machine": {
			reason: "every spec field but the bridge's and Crossplane's, credentials of the composed resources' provider",
			xrd:    "xrds/crossplanemachines.yaml", comp: "local/machine.yaml",
			want: map[string]any{
				"failureDomain":                 "zone-a",
				"providerConfigRef.apiGroup":    "kubernetes.m.crossplane.io",
				"providerConfigRef.kind":        "ProviderConfig",
				"bootstrap.dataSecretRef.key":   "value",
				"network.region":                "region-1",
				"parameters.rootVolume.sizeGiB": int64(8),
			},
			absent:    [][]string{{"spec", "crossplane"}, {"spec", "providerID"}},
			namespace: "default",
		},
		"Cluster": {
			reason: "an object's default does not hide its fields; defaults are kept",
			xrd:    "xrds/crossplaneclusters.yaml", comp: "aws/cluster.yaml",
			want: map[string]any{
				"parameters.region":                          "region-1",
				"parameters.network.cidrBlock":               "10.0.0.0/16",
				"parameters.controlPlaneLoadBalancer.port":   int64(6443),
				"parameters.controlPlaneLoadBalancer.scheme": "InternetFacing",
				"providerConfigRef.apiGroup":                 "aws.m.upbound.io",
			},
			absent: [][]string{{"spec", "controlPlaneEndpoint"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			xrd, err := compositions.Read(tc.xrd)
			if err != nil {
				t.Fatal(err)
			}
			comp, err := compositions.Read(tc.comp)
			if err != nil {
				t.Fatal(err)
			}
			xr, err := ExampleFromXRD(xrd, comp)
			if err != nil {
				t.Fatal(err)
			}
			for path, want := range tc.want {
				got, found, _ := unstructured.NestedFieldNoCopy(xr.Object, append([]string{"spec"}, strings.Split(path, ".")...)...)
				if !found || got != want {
					t.Errorf("%s: spec.%s = %v (%t), want %v", tc.reason, path, got, found, want)
				}
			}
			for _, p := range tc.absent {
				if _, found, _ := unstructured.NestedFieldNoCopy(xr.Object, p...); found {
					t.Errorf("%s: %v is set", tc.reason, p)
				}
			}
			if tc.namespace != "" && xr.GetNamespace() != tc.namespace {
				t.Errorf("%s: namespace %q, want %q", tc.reason, xr.GetNamespace(), tc.namespace)
			}
		})
	}
}
