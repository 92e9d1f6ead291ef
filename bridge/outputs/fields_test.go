package outputs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

func TestSpec(t *testing.T) {
	endpoint := infrav1.APIEndpoint{Host: "10.0.0.1", Port: 6443}
	cases := map[string]struct {
		reason string
		fields Fields
		// spec is the XR's spec before the fields are set.
		spec map[string]any
		want map[string]any
	}{
		"Cluster": {
			reason: "An InfraCluster's spec holds the control plane endpoint.",
			fields: Cluster{Endpoint: endpoint}.Spec(false),
			spec:   map[string]any{"parameters": map[string]any{"region": "here"}},
			want: map[string]any{
				"parameters":           map[string]any{"region": "here"},
				"controlPlaneEndpoint": map[string]any{"host": "10.0.0.1", "port": int64(6443)},
			},
		},
		"ClusterUnderAManagedControlPlane": {
			reason: "Under a managed control plane, the infrastructure's endpoint is not copied: the control plane's is the cluster's.",
			fields: Cluster{Endpoint: endpoint}.Spec(true),
			spec:   map[string]any{},
			want:   map[string]any{},
		},
		"Machine": {
			reason: "An InfraMachine's spec holds its provider ID.",
			fields: Machine{ProviderID: "aws:///eu-west-1a/i-0abc"}.Spec(),
			spec:   map[string]any{"providerID": "aws:///eu-west-1a/i-0abc"},
			want:   map[string]any{"providerID": "aws:///eu-west-1a/i-0abc"},
		},
		"MachinePool": {
			reason: "An InfraMachinePool's spec holds its machines' provider IDs, in the composition's order.",
			fields: MachinePool{ProviderIDList: []string{"kwok://b", "kwok://a"}}.Spec(),
			spec:   map[string]any{"providerIDList": []any{"kwok://gone"}},
			want:   map[string]any{"providerIDList": []any{"kwok://b", "kwok://a"}},
		},
		"EmptyMachinePool": {
			reason: "A pool of no machines holds an empty list, not none.",
			fields: MachinePool{}.Spec(),
			spec:   map[string]any{},
			want:   map[string]any{"providerIDList": []any{}},
		},
		"ControlPlane": {
			reason: "A ControlPlane's spec holds the endpoint its service serves.",
			fields: ControlPlane{Endpoint: endpoint, Version: "v1.36.0"}.Spec(),
			spec:   map[string]any{},
			want:   map[string]any{"controlPlaneEndpoint": map[string]any{"host": "10.0.0.1", "port": int64(6443)}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{"spec": tc.spec}}
			tc.fields.Set(u)
			if diff := cmp.Diff(tc.want, u.Object["spec"]); diff != "" {
				t.Errorf("%s\nspec -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
