package gate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

func cluster(provisioned bool) *clusterv1.Cluster {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "alpha"}}
	c.Status.Initialization.InfrastructureProvisioned = ptr.To(provisioned)
	return c
}

func machine(secret, fd string, controlPlane bool) *clusterv1.Machine {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "alpha-md-0-abc", Labels: map[string]string{}}}
	if secret != "" {
		m.Spec.Bootstrap.DataSecretName = ptr.To(secret)
	}
	m.Spec.FailureDomain = fd
	if controlPlane {
		m.Labels[clusterv1.MachineControlPlaneLabel] = ""
	}
	return m
}

func u(o map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: o} }

var awsClusterXR = u(map[string]any{
	"kind":     "CrossplaneCluster",
	"metadata": map[string]any{"name": "alpha"},
	"spec": map[string]any{
		"parameters":        map[string]any{"region": "eu-west-1"},
		"providerConfigRef": map[string]any{"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": "team-a"},
	},
	"status": map[string]any{
		"failureDomains": []any{map[string]any{"name": "eu-west-1a"}, map[string]any{"name": "eu-west-1b"}},
		"outputs": map[string]any{"network": map[string]any{
			"id": "vpc-1",
			"subnets": []any{
				map[string]any{"id": "subnet-pub-a", "failureDomain": "eu-west-1a", "role": "Public"},
				map[string]any{"id": "subnet-priv-a", "failureDomain": "eu-west-1a", "role": "Private"},
				map[string]any{"id": "subnet-priv-b", "failureDomain": "eu-west-1b", "role": "Private"},
			},
			"securityGroups": []any{
				map[string]any{"id": "sg-cp", "role": "ControlPlane"},
				map[string]any{"id": "sg-node", "role": "Node"},
				map[string]any{"id": "sg-lb", "role": "LoadBalancer"},
			},
		}},
	},
})

func TestDecide(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     Inputs
		want   Decision
		// sources, when set, are the Sources wanted; other cases leave
		// them out of the comparison.
		sources []string
	}{
		"WaitForClusterInfrastructure": {
			reason: "nothing is composed before the cluster's infrastructure is provisioned",
			in:     Inputs{Machine: machine("boot", "", false), Cluster: cluster(false), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want:   Decision{Verdict: verdict.Verdict{Reason: infrav1.WaitingForClusterInfrastructureReason, Message: "Waiting for the infrastructure of Cluster alpha to be provisioned"}},
		},
		"WaitForBootstrapData": {
			reason: "nothing is composed before the bootstrap data exists",
			in:     Inputs{Machine: machine("", "", false), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want:   Decision{Verdict: verdict.Verdict{Reason: infrav1.WaitingForBootstrapDataReason, Message: "Waiting for the bootstrap data secret of Machine alpha-md-0-abc"}},
		},
		"OpenWorker": {
			reason: "a worker gets the secret reference, its failure domain, the private subnet there, the node security group and the cluster's credentials",
			in:     Inputs{Machine: machine("alpha-md-0-abc", "eu-west-1a", false), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"bootstrap":     map[string]any{"dataSecretRef": map[string]any{"name": "alpha-md-0-abc", "key": "value"}},
				"failureDomain": "eu-west-1a",
				"network":       map[string]any{"region": "eu-west-1", "networkID": "vpc-1", "subnetID": "subnet-priv-a", "securityGroupIDs": []any{"sg-node"}},
				"providerConfigRef": map[string]any{
					"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": "team-a",
				},
			}},
			sources: []string{
				"spec.bootstrap: Machine alpha-md-0-abc's bootstrap data secret alpha-md-0-abc",
				"spec.failureDomain: Machine.spec.failureDomain",
				"spec.network.networkID: CrossplaneCluster alpha's status.outputs.network",
				"spec.network.region: CrossplaneCluster alpha's spec.parameters.region",
				"spec.network.securityGroupIDs: CrossplaneCluster alpha's status.outputs.network",
				"spec.network.subnetID: CrossplaneCluster alpha's status.outputs.network",
				"spec.providerConfigRef: CrossplaneCluster alpha's spec.providerConfigRef",
			},
		},
		"OpenControlPlaneKeepsOwnCredentials": {
			reason: "a control-plane machine also joins the control-plane group; a machine naming its own credentials keeps them",
			in: Inputs{Machine: machine("cp-0", "eu-west-1b", true), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"providerConfigRef": map[string]any{"name": "own"}}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"bootstrap":     map[string]any{"dataSecretRef": map[string]any{"name": "cp-0", "key": "value"}},
				"failureDomain": "eu-west-1b",
				"network":       map[string]any{"region": "eu-west-1", "networkID": "vpc-1", "subnetID": "subnet-priv-b", "securityGroupIDs": []any{"sg-cp", "sg-node"}},
			}},
		},
		"OpenWithoutNetworkOutputs": {
			reason: "backends without a network (local, some bring-your-own) inject only what exists",
			in:     Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: u(map[string]any{}), XR: u(map[string]any{})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}},
			}},
		},
		"UnknownFailureDomain": {
			reason: "a failure domain the cluster does not have is refused, naming the ones it has",
			in:     Inputs{Machine: machine("boot", "us-east-1a", false), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidFailureDomainReason,
				Message: `Machine.spec.failureDomain "us-east-1a" is not one of the cluster's failure domains: eu-west-1a, eu-west-1b`}},
		},
		"AlreadyInjected": {
			reason: "once opened, the gate stays open and injects nothing again, even if the cluster's failure domains change",
			in: Inputs{Machine: machine("boot", "eu-west-1c", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{
					"bootstrap":         map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}},
					"failureDomain":     "eu-west-1c",
					"network":           map[string]any{"region": "eu-west-1"},
					"providerConfigRef": map[string]any{"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": "team-a"},
				}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}},
		},
		"PresetDataSecretRefOfAnotherMachine": {
			reason: "a dataSecretRef preset in a template must not boot the machine from someone else's bootstrap data",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "other-cluster-boot", "key": "value"}}}})},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidBootstrapDataRefReason,
				Message: "spec.bootstrap.dataSecretRef other-cluster-boot/value is set by the bridge, not preset: Machine alpha-md-0-abc's bootstrap data is boot/value; recreate the machine without it"}},
		},
		"PresetDataSecretRefBeforeBootstrapData": {
			reason: "a preset dataSecretRef never skips the wait for the Machine's bootstrap data",
			in: Inputs{Machine: machine("", "", false), Cluster: cluster(false), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}}}})},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidBootstrapDataRefReason,
				Message: "spec.bootstrap.dataSecretRef boot/value is set by the bridge, not preset: Machine alpha-md-0-abc has no bootstrap data secret yet; recreate the machine without it"}},
		},
		"PresetMatchingDataSecretRefStillInjects": {
			reason: "a preset dataSecretRef that happens to be right does not skip the injection of the network and credentials",
			in: Inputs{Machine: machine("boot", "eu-west-1b", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}}}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"failureDomain":     "eu-west-1b",
				"network":           map[string]any{"region": "eu-west-1", "networkID": "vpc-1", "subnetID": "subnet-priv-b", "securityGroupIDs": []any{"sg-node"}},
				"providerConfigRef": map[string]any{"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": "team-a"},
			}},
		},
		"PresetFailureDomainDiffers": {
			reason: "the machine is placed where CAPI placed its Machine, not where a template says",
			in: Inputs{Machine: machine("boot", "eu-west-1a", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"failureDomain": "eu-west-1b"}})},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidFailureDomainReason,
				Message: `spec.failureDomain "eu-west-1b" differs from Machine.spec.failureDomain "eu-west-1a", where CAPI placed the machine`}},
		},
		"ExistingHostPlacesTheMachine": {
			reason: "a Machine in no failure domain, for a host that exists in one, gets that zone's subnet; its spec.failureDomain stays CAPI's to give",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"parameters": map[string]any{"host": map[string]any{"providerID": "byo://h", "failureDomain": "eu-west-1b"}}}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"bootstrap":         map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}},
				"network":           map[string]any{"region": "eu-west-1", "networkID": "vpc-1", "subnetID": "subnet-priv-b", "securityGroupIDs": []any{"sg-node"}},
				"providerConfigRef": map[string]any{"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": "team-a"},
			}},
		},
		"ExistingHostElsewhere": {
			reason: "CAPI cannot place a Machine in another failure domain than its existing host's",
			in: Inputs{Machine: machine("boot", "eu-west-1a", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"parameters": map[string]any{"host": map[string]any{"providerID": "byo://h", "failureDomain": "eu-west-1b"}}}})},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidFailureDomainReason,
				Message: `Machine.spec.failureDomain "eu-west-1a" is not where the existing host is (spec.parameters.host.failureDomain "eu-west-1b"): place the Machine in "eu-west-1b" or in no failure domain`}},
		},
		"ExistingHostInAnUnknownFailureDomain": {
			reason: "an existing host's failure domain must be one of the cluster's, and the message names the host's field",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"parameters": map[string]any{"host": map[string]any{"providerID": "byo://h", "failureDomain": "rack-9"}}}})},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidFailureDomainReason,
				Message: `spec.parameters.host.failureDomain "rack-9" is not one of the cluster's failure domains: eu-west-1a, eu-west-1b`}},
		},
		"TemplateNetworkCompletedByTheCluster": {
			reason: "a machine template's own region and subnet are kept; what it lacks comes from the cluster's outputs, each field saying where from",
			in: Inputs{Machine: machine("boot", "eu-west-1a", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"network": map[string]any{"region": "eu-west-3", "subnetID": "subnet-own"}}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"bootstrap":         map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}},
				"failureDomain":     "eu-west-1a",
				"network":           map[string]any{"networkID": "vpc-1", "securityGroupIDs": []any{"sg-node"}},
				"providerConfigRef": map[string]any{"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": "team-a"},
			}},
			sources: []string{
				"spec.bootstrap: Machine alpha-md-0-abc's bootstrap data secret boot",
				"spec.failureDomain: Machine.spec.failureDomain",
				"spec.network.networkID: CrossplaneCluster alpha's status.outputs.network",
				"spec.network.region: the machine's own spec",
				"spec.network.securityGroupIDs: CrossplaneCluster alpha's status.outputs.network",
				"spec.network.subnetID: the machine's own spec",
				"spec.providerConfigRef: CrossplaneCluster alpha's spec.providerConfigRef",
			},
		},
		"ExternallyManagedClusterWithoutOutputs": {
			reason: "under an InfraCluster that reports no network and names no credentials, the machine's own network and credentials are all it gets",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(true),
				ClusterXR: u(map[string]any{"kind": "ExternalCluster", "metadata": map[string]any{"name": "legacy"}}),
				XR: u(map[string]any{"spec": map[string]any{
					"network":           map[string]any{"region": "eu-west-3", "subnetID": "subnet-own", "securityGroupIDs": []any{"sg-own"}},
					"providerConfigRef": map[string]any{"name": "own"},
				}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}},
			}},
			sources: []string{
				"spec.bootstrap: Machine alpha-md-0-abc's bootstrap data secret boot",
				"spec.network.region: the machine's own spec",
				"spec.network.securityGroupIDs: the machine's own spec",
				"spec.network.subnetID: the machine's own spec",
				"spec.providerConfigRef: the machine's own spec",
			},
		},
		"MachineOwnCredentialsKept": {
			reason: "a machine naming its own credentials keeps them (the credentials check judges them)",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: u(map[string]any{"spec": map[string]any{"providerConfigRef": map[string]any{"name": "cluster-creds"}}}),
				XR: u(map[string]any{"spec": map[string]any{"providerConfigRef": map[string]any{"name": "own"}}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}},
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Decide(tc.in)
			tc.want.Sources = tc.sources
			if tc.sources == nil {
				got.Sources = nil
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nDecide(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
