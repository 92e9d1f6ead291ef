package gate

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

func TestDecideControlPlane(t *testing.T) {
	network := map[string]any{"region": "eu-west-1", "networkID": "vpc-1",
		"subnetIDs": []any{"subnet-priv-a", "subnet-priv-b"}, "securityGroupIDs": []any{"sg-cp"}}
	cases := map[string]struct {
		reason  string
		in      ControlPlaneInputs
		want    Decision
		sources []string
	}{
		"WaitForClusterInfrastructure": {
			reason: "a service is placed in the cluster's network, which must be provisioned first",
			in:     ControlPlaneInputs{Cluster: cluster(false), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.WaitingForClusterInfrastructureReason,
				Message: "Waiting for the infrastructure of Cluster alpha to be provisioned"}},
		},
		"Open": {
			reason:  "an open gate injects the region, the network, a private subnet per failure domain and the ControlPlane security groups",
			in:      ControlPlaneInputs{Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want:    Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{"network": network}},
			sources: []string{"spec.network: CrossplaneCluster alpha's status.outputs.network"},
		},
		"Injected": {
			reason: "what was injected before is not injected again",
			in:     ControlPlaneInputs{Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{"spec": map[string]any{"network": network}})},
			want:   Decision{Verdict: verdict.Verdict{Ready: true}},
		},
		"InjectedButPruned": {
			reason: "a network injected before is not sent again where an adopted XRD's schema pruned it",
			in: ControlPlaneInputs{Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{"metadata": map[string]any{
				"annotations": map[string]any{infrav1.InjectedFromAnnotation: "spec.network: CrossplaneCluster alpha's status.outputs.network"}}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}},
		},
		"OtherFieldInjected": {
			reason: "only the network's own line marks the network injected",
			in: ControlPlaneInputs{Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{"metadata": map[string]any{
				"annotations": map[string]any{infrav1.InjectedFromAnnotation: "spec.networkPolicy: the control plane's own spec"}}})},
			want:    Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{"network": network}},
			sources: []string{"spec.network: CrossplaneCluster alpha's status.outputs.network"},
		},
		"OwnSubnets": {
			reason: "subnets the control plane names are its own choice; what it lacks is injected",
			in: ControlPlaneInputs{Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{"spec": map[string]any{
				"network": map[string]any{"subnetIDs": []any{"subnet-mine"}}}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{"network": map[string]any{
				"region": "eu-west-1", "networkID": "vpc-1", "securityGroupIDs": []any{"sg-cp"}}}},
		},
		"NoInfrastructureXR": {
			reason: "a cluster without an infrastructure XR gives nothing to inject, and holds nothing",
			in:     ControlPlaneInputs{Cluster: cluster(true), XR: u(map[string]any{})},
			want:   Decision{Verdict: verdict.Verdict{Ready: true}},
		},
		"NoNetworkReported": {
			reason: "a cluster that reports no network (the local backend) gives only its region, if any",
			in: ControlPlaneInputs{Cluster: cluster(true), XR: u(map[string]any{}), ClusterXR: u(map[string]any{
				"kind": "CrossplaneCluster", "metadata": map[string]any{"name": "alpha"}, "spec": map[string]any{}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DecideControlPlane(tc.in)
			sources := got.Sources
			got.Sources = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nDecideControlPlane(...): -want, +got:\n%s", tc.reason, diff)
			}
			if tc.sources != nil {
				if diff := cmp.Diff(tc.sources, sources); diff != "" {
					t.Errorf("%s\nDecideControlPlane(...).Sources: -want, +got:\n%s", tc.reason, diff)
				}
			}
		})
	}
}
