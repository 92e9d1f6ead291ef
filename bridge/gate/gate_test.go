package gate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
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
	}{
		"WaitForClusterInfrastructure": {
			reason: "nothing is composed before the cluster's infrastructure is provisioned",
			in:     Inputs{Machine: machine("boot", "", false), Cluster: cluster(false), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want:   Decision{Reason: infrav1.WaitingForClusterInfrastructureReason, Message: "Waiting for the infrastructure of Cluster alpha to be provisioned"},
		},
		"WaitForBootstrapData": {
			reason: "nothing is composed before the bootstrap data exists",
			in:     Inputs{Machine: machine("", "", false), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want:   Decision{Reason: infrav1.WaitingForBootstrapDataReason, Message: "Waiting for the bootstrap data secret of Machine alpha-md-0-abc"},
		},
		"OpenWorker": {
			reason: "a worker gets the secret reference, its failure domain, the private subnet there, the node security group and the cluster's credentials",
			in:     Inputs{Machine: machine("alpha-md-0-abc", "eu-west-1a", false), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want: Decision{Open: true, Spec: map[string]any{
				"bootstrap":     map[string]any{"dataSecretRef": map[string]any{"name": "alpha-md-0-abc", "key": "value"}},
				"failureDomain": "eu-west-1a",
				"network":       map[string]any{"region": "eu-west-1", "networkID": "vpc-1", "subnetID": "subnet-priv-a", "securityGroupIDs": []any{"sg-node"}},
				"providerConfigRef": map[string]any{
					"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": "team-a",
				},
			}},
		},
		"OpenControlPlaneKeepsOwnCredentials": {
			reason: "a control-plane machine also joins the control-plane group; a machine naming its own credentials keeps them",
			in: Inputs{Machine: machine("cp-0", "eu-west-1b", true), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"providerConfigRef": map[string]any{"name": "own"}}})},
			want: Decision{Open: true, Spec: map[string]any{
				"bootstrap":     map[string]any{"dataSecretRef": map[string]any{"name": "cp-0", "key": "value"}},
				"failureDomain": "eu-west-1b",
				"network":       map[string]any{"region": "eu-west-1", "networkID": "vpc-1", "subnetID": "subnet-priv-b", "securityGroupIDs": []any{"sg-cp", "sg-node"}},
			}},
		},
		"OpenWithoutNetworkOutputs": {
			reason: "backends without a network (local, some bring-your-own) inject only what exists",
			in:     Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: u(map[string]any{}), XR: u(map[string]any{})},
			want: Decision{Open: true, Spec: map[string]any{
				"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}},
			}},
		},
		"UnknownFailureDomain": {
			reason: "a failure domain the cluster does not have is refused, naming the ones it has",
			in:     Inputs{Machine: machine("boot", "us-east-1a", false), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want: Decision{Reason: infrav1.InvalidFailureDomainReason,
				Message: `Machine.spec.failureDomain "us-east-1a" is not one of the cluster's failure domains: eu-west-1a, eu-west-1b`},
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
			want: Decision{Open: true},
		},
		"PresetDataSecretRefOfAnotherMachine": {
			reason: "a dataSecretRef preset in a template must not boot the machine from someone else's bootstrap data",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "other-cluster-boot", "key": "value"}}}})},
			want: Decision{Reason: infrav1.InvalidBootstrapDataRefReason,
				Message: "spec.bootstrap.dataSecretRef other-cluster-boot/value is set by the bridge, not preset: Machine alpha-md-0-abc's bootstrap data is boot/value; recreate the machine without it"},
		},
		"PresetDataSecretRefBeforeBootstrapData": {
			reason: "a preset dataSecretRef never skips the wait for the Machine's bootstrap data",
			in: Inputs{Machine: machine("", "", false), Cluster: cluster(false), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}}}})},
			want: Decision{Reason: infrav1.InvalidBootstrapDataRefReason,
				Message: "spec.bootstrap.dataSecretRef boot/value is set by the bridge, not preset: Machine alpha-md-0-abc has no bootstrap data secret yet; recreate the machine without it"},
		},
		"PresetMatchingDataSecretRefStillInjects": {
			reason: "a preset dataSecretRef that happens to be right does not skip the injection of the network and credentials",
			in: Inputs{Machine: machine("boot", "eu-west-1b", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}}}})},
			want: Decision{Open: true, Spec: map[string]any{
				"failureDomain":     "eu-west-1b",
				"network":           map[string]any{"region": "eu-west-1", "networkID": "vpc-1", "subnetID": "subnet-priv-b", "securityGroupIDs": []any{"sg-node"}},
				"providerConfigRef": map[string]any{"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": "team-a"},
			}},
		},
		"PresetFailureDomainDiffers": {
			reason: "the machine is placed where CAPI placed its Machine, not where a template says",
			in: Inputs{Machine: machine("boot", "eu-west-1a", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"failureDomain": "eu-west-1b"}})},
			want: Decision{Reason: infrav1.InvalidFailureDomainReason,
				Message: `spec.failureDomain "eu-west-1b" differs from Machine.spec.failureDomain "eu-west-1a", where CAPI placed the machine`},
		},
		"MachineOwnCredentialsKept": {
			reason: "a machine naming its own credentials keeps them (the credentials check judges them)",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: u(map[string]any{"spec": map[string]any{"providerConfigRef": map[string]any{"name": "cluster-creds"}}}),
				XR: u(map[string]any{"spec": map[string]any{"providerConfigRef": map[string]any{"name": "own"}}})},
			want: Decision{Open: true, Spec: map[string]any{
				"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}},
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Decide(tc.in)); diff != "" {
				t.Errorf("%s\nDecide(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
