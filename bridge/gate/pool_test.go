package gate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

func pool(secret string, replicas *int32, fds ...string) *clusterv1.MachinePool {
	mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: "alpha-mp-0"}}
	if secret != "" {
		mp.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To(secret)
	}
	mp.Spec.Replicas = replicas
	mp.Spec.FailureDomains = fds
	return mp
}

// initialized is the cluster with its control plane initialized.
func initialized(c *clusterv1.Cluster) *clusterv1.Cluster {
	c.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	return c
}

// managedPool is a MachinePool whose instances need no bootstrap data.
func managedPool(replicas *int32) *clusterv1.MachinePool {
	mp := pool("", replicas)
	mp.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To("")
	return mp
}

func TestDecidePool(t *testing.T) {
	teamA := map[string]any{"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": "team-a"}
	boot := func(name string) map[string]any {
		return map[string]any{"dataSecretRef": map[string]any{"name": name, "key": "value"}}
	}
	composed := func(replicas int64, secret string) map[string]any {
		return map[string]any{"spec": map[string]any{
			"replicas":          replicas,
			"bootstrap":         boot(secret),
			"failureDomains":    []any{"eu-west-1a", "eu-west-1b"},
			"providerConfigRef": teamA,
			"network": map[string]any{"region": "eu-west-1", "networkID": "vpc-1",
				"subnetIDs": []any{"subnet-priv-a", "subnet-priv-b"}, "securityGroupIDs": []any{"sg-node"}},
		}}
	}
	cases := map[string]struct {
		reason  string
		in      PoolInputs
		want    Decision
		sources []string
	}{
		"WaitForClusterInfrastructure": {
			reason: "nothing is composed before the cluster's infrastructure is provisioned",
			in:     PoolInputs{MachinePool: pool("boot", ptr.To[int32](2)), Cluster: cluster(false), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want:   Decision{Verdict: verdict.Verdict{Reason: infrav1.WaitingForClusterInfrastructureReason, Message: "Waiting for the infrastructure of Cluster alpha to be provisioned"}},
		},
		"WaitForBootstrapData": {
			reason: "nothing is composed before the bootstrap data exists",
			in:     PoolInputs{MachinePool: pool("", ptr.To[int32](2)), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want:   Decision{Verdict: verdict.Verdict{Reason: infrav1.WaitingForBootstrapDataReason, Message: "Waiting for the bootstrap data secret of MachinePool alpha-mp-0"}},
		},
		"WaitForControlPlane": {
			reason: "instances that need no bootstrap data join the control plane directly: nothing is composed before it is initialized",
			in:     PoolInputs{MachinePool: managedPool(ptr.To[int32](2)), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.WaitingForControlPlaneReason,
				Message: "Waiting for the control plane of Cluster alpha to be initialized: the instances of MachinePool alpha-mp-0 need no bootstrap data and join it directly"}},
		},
		"OpenWithoutBootstrapDataUnderMachines": {
			reason: "a cluster whose control plane is Machines (no controlPlaneRef) has only CAPI's ControlPlaneInitialized condition to say so: it opens the gate",
			in: PoolInputs{MachinePool: managedPool(ptr.To[int32](2)), Cluster: func() *clusterv1.Cluster {
				c := cluster(true)
				c.Status.Conditions = []metav1.Condition{{Type: clusterv1.ClusterControlPlaneInitializedCondition, Status: metav1.ConditionTrue, Reason: "Initialized"}}
				return c
			}(), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: func() map[string]any {
				s := composed(2, "")["spec"].(map[string]any)
				delete(s, "bootstrap")
				return s
			}()},
		},
		"OpenWithoutBootstrapData": {
			reason: "a MachinePool whose data secret name is empty needs no bootstrap data (a managed node group's): once the control plane is initialized, the gate opens with no bootstrap reference",
			in:     PoolInputs{MachinePool: managedPool(ptr.To[int32](2)), Cluster: initialized(cluster(true)), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: func() map[string]any {
				s := composed(2, "")["spec"].(map[string]any)
				delete(s, "bootstrap")
				return s
			}()},
			sources: []string{
				"spec.failureDomains: the Cluster's failure domains (MachinePool.spec.failureDomains is empty)",
				"spec.network: CrossplaneCluster alpha's status.outputs.network",
				"spec.providerConfigRef: CrossplaneCluster alpha's spec.providerConfigRef",
				"spec.replicas: MachinePool.spec.replicas",
			},
		},
		"BootstrapDataNoLongerNeeded": {
			reason:  "a MachinePool that sets its data secret name to empty takes the bootstrap reference off the XR",
			in:      PoolInputs{MachinePool: managedPool(ptr.To[int32](2)), Cluster: initialized(cluster(true)), ClusterXR: awsClusterXR, XR: u(composed(2, "boot"))},
			want:    Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{"bootstrap": nil}},
			sources: []string{},
		},
		"Open": {
			reason: "an open gate injects the replicas, the bootstrap reference, every failure domain of the cluster and their network, and the cluster's credentials",
			in:     PoolInputs{MachinePool: pool("boot", ptr.To[int32](2)), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want:   Decision{Verdict: verdict.Verdict{Ready: true}, Spec: composed(2, "boot")["spec"].(map[string]any)},
			sources: []string{
				"spec.bootstrap: MachinePool alpha-mp-0's bootstrap data secret boot",
				"spec.failureDomains: the Cluster's failure domains (MachinePool.spec.failureDomains is empty)",
				"spec.network: CrossplaneCluster alpha's status.outputs.network",
				"spec.providerConfigRef: CrossplaneCluster alpha's spec.providerConfigRef",
				"spec.replicas: MachinePool.spec.replicas",
			},
		},
		"OpenInFailureDomains": {
			reason: "a pool in named failure domains gets them and only their subnets",
			in:     PoolInputs{MachinePool: pool("boot", ptr.To[int32](1), "eu-west-1a"), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"replicas": int64(1), "bootstrap": boot("boot"), "providerConfigRef": teamA, "failureDomains": []any{"eu-west-1a"},
				"network": map[string]any{"region": "eu-west-1", "networkID": "vpc-1", "subnetIDs": []any{"subnet-priv-a"}, "securityGroupIDs": []any{"sg-node"}},
			}},
		},
		"DefaultReplicas": {
			reason: "a MachinePool that CAPI's defaulting did not reach runs one machine, as CAPI's default has it",
			in:     PoolInputs{MachinePool: pool("boot", nil), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(composed(1, "boot"))},
			want:   Decision{Verdict: verdict.Verdict{Ready: true}},
		},
		"Unchanged": {
			reason: "a composed pool whose MachinePool is as it was gets nothing",
			in:     PoolInputs{MachinePool: pool("boot", ptr.To[int32](2)), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(composed(2, "boot"))},
			want:   Decision{Verdict: verdict.Verdict{Ready: true}},
		},
		"Scaled": {
			reason:  "the replicas follow the MachinePool, and only they are written",
			in:      PoolInputs{MachinePool: pool("boot", ptr.To[int32](5)), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(composed(2, "boot"))},
			want:    Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{"replicas": int64(5)}},
			sources: []string{"spec.replicas: MachinePool.spec.replicas"},
		},
		"ScaledToZero": {
			reason: "zero is a size a pool may have",
			in:     PoolInputs{MachinePool: pool("boot", ptr.To[int32](0)), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(composed(2, "boot"))},
			want:   Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{"replicas": int64(0)}},
		},
		"NewBootstrapData": {
			reason: "a new bootstrap secret of the MachinePool's template is the pool's next machines' bootstrap data",
			in:     PoolInputs{MachinePool: pool("boot-2", ptr.To[int32](2)), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(composed(2, "boot"))},
			want:   Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{"bootstrap": boot("boot-2")}},
		},
		"FailureDomainsDropped": {
			reason: "failure domains the MachinePool no longer names give way to every one of the cluster's: the pool spreads over them again",
			in: PoolInputs{MachinePool: pool("boot", ptr.To[int32](2)), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(func() map[string]any {
				o := composed(2, "boot")
				o["spec"].(map[string]any)["failureDomains"] = []any{"eu-west-1a"}
				return o
			}())},
			want:    Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{"failureDomains": []any{"eu-west-1a", "eu-west-1b"}}},
			sources: []string{"spec.failureDomains: the Cluster's failure domains (MachinePool.spec.failureDomains is empty)"},
		},
		"NoFailureDomainsAnywhere": {
			reason: "a pool of a cluster that reports no failure domains holds none",
			in: PoolInputs{MachinePool: pool("boot", ptr.To[int32](2)), Cluster: cluster(true), XR: u(map[string]any{"spec": map[string]any{
				"replicas": int64(2), "bootstrap": boot("boot"), "failureDomains": []any{"zone-a"},
			}})},
			want:    Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{"failureDomains": nil}},
			sources: []string{},
		},
		"PresetBootstrapRef": {
			reason: "a bootstrap reference someone preset is replaced by the MachinePool's before anything composes",
			in: PoolInputs{MachinePool: pool("boot", ptr.To[int32](2)), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{"spec": map[string]any{
				"replicas": int64(2), "bootstrap": boot("someone-elses"), "providerConfigRef": teamA, "failureDomains": []any{"eu-west-1a", "eu-west-1b"},
				"network": map[string]any{"region": "eu-west-1", "networkID": "vpc-1", "subnetIDs": []any{"x"}, "securityGroupIDs": []any{"sg-node"}},
			}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{"bootstrap": boot("boot")}},
		},
		"OwnCredentials": {
			reason: "a pool that names its own credentials keeps them (the credentials check judges them)",
			in: PoolInputs{MachinePool: pool("boot", ptr.To[int32](2)), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{"spec": map[string]any{
				"providerConfigRef": map[string]any{"kind": "ProviderConfig", "name": "mine"},
			}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"replicas": int64(2), "bootstrap": boot("boot"), "failureDomains": []any{"eu-west-1a", "eu-west-1b"},
				"network": map[string]any{"region": "eu-west-1", "networkID": "vpc-1", "subnetIDs": []any{"subnet-priv-a", "subnet-priv-b"}, "securityGroupIDs": []any{"sg-node"}},
			}},
		},
		"UnknownFailureDomain": {
			reason: "a pool placed where the cluster has no failure domain is refused, naming the known ones",
			in:     PoolInputs{MachinePool: pool("boot", ptr.To[int32](2), "eu-west-1a", "us-east-1a"), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidFailureDomainReason,
				Message: `MachinePool.spec.failureDomains "us-east-1a" is not one of the cluster's failure domains: eu-west-1a, eu-west-1b`}},
		},
		"FailureDomainsWithoutClusterXR": {
			reason: "failure domains cannot be checked against a cluster that reports none",
			in:     PoolInputs{MachinePool: pool("boot", ptr.To[int32](2), "zone-a"), Cluster: cluster(true), XR: u(map[string]any{})},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidFailureDomainReason,
				Message: `MachinePool.spec.failureDomains "zone-a" is set but the cluster reports no failure domains`}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DecidePool(tc.in)
			sources := got.Sources
			got.Sources = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nDecidePool(...): -want, +got:\n%s", tc.reason, diff)
			}
			if tc.sources != nil {
				if diff := cmp.Diff(tc.sources, sources); diff != "" {
					t.Errorf("%s\nDecidePool(...).Sources: -want, +got:\n%s", tc.reason, diff)
				}
			}
		})
	}
}
