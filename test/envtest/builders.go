package envtest

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// TestBootstrapGroup is the API group of the test bootstrap provider's
// TestBootstrapConfig and TestBootstrapConfigTemplate kinds (testdata/crds):
// CAPI's bootstrap providers' group, as kubeadm's is.
const TestBootstrapGroup = "bootstrap.cluster.x-k8s.io"

// MachineDeployment is a MachineDeployment of replicas workers of a cluster,
// in failureDomain, bootstrapped from the test bootstrap template "workers"
// and built from the CrossplaneMachineTemplate infraTemplate, with the
// rollout and deletion settings CAPI's defaulting webhook would set (no
// webhook runs in the test environments).
func MachineDeployment(ns, cluster, name, infraTemplate, failureDomain string, replicas int32) *clusterv1.MachineDeployment {
	labels := map[string]string{clusterv1.ClusterNameLabel: cluster, clusterv1.MachineDeploymentNameLabel: name}
	return &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: cluster,
			Replicas:    ptr.To(replicas),
			Selector:    metav1.LabelSelector{MatchLabels: labels},
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
					MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1)),
				},
			}},
			Deletion: clusterv1.MachineDeploymentDeletionSpec{Order: clusterv1.NewestMachineSetDeletionOrder},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec: clusterv1.MachineSpec{
					ClusterName:   cluster,
					Version:       "v1.36.0",
					FailureDomain: failureDomain,
					Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: TestBootstrapGroup, Kind: "TestBootstrapConfigTemplate", Name: "workers",
					}},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.CrossplaneMachineTemplateKind, Name: infraTemplate,
					},
				},
			},
		},
	}
}

// ExecPluginKubeconfig is a kubeconfig whose user is an exec plugin: a
// provider that loads it runs the command, in its own process, to
// authenticate. Tests use it as a tenant's credentials that act as the
// provider's identity.
const ExecPluginKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ["-c", "cat /var/run/secrets/kubernetes.io/serviceaccount/token"]}}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
