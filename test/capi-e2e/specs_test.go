//go:build e2e

package capie2e

import (
	"context"
	"slices"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capie2e "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

var _ = ginkgo.Describe("When testing MachineDeployment scale out/in [e2e-local]", func() {
	capie2e.MachineDeploymentScaleSpec(ctx, func() capie2e.MachineDeploymentScaleSpecInput {
		return capie2e.MachineDeploymentScaleSpecInput{
			E2EConfig:              e2eConfig,
			ClusterctlConfigPath:   clusterctlConfigPath,
			BootstrapClusterProxy:  bootstrapClusterProxy,
			ArtifactFolder:         artifactFolder,
			SkipCleanup:            *skipCleanup,
			InfrastructureProvider: ptr.To("crossplane"),
			Flavor:                 "e2e-local",
		}
	})
})

var _ = ginkgo.Describe("When testing KCP and MachineDeployment rollout [e2e-kcp-md-taints]", func() {
	capie2e.KCPAndMachineDeploymentRolloutSpec(ctx, func() capie2e.KCPAndMachineDeploymentRolloutSpecInput {
		return capie2e.KCPAndMachineDeploymentRolloutSpecInput{
			E2EConfig:              e2eConfig,
			ClusterctlConfigPath:   clusterctlConfigPath,
			BootstrapClusterProxy:  bootstrapClusterProxy,
			ArtifactFolder:         artifactFolder,
			SkipCleanup:            *skipCleanup,
			InfrastructureProvider: ptr.To("crossplane"),
			Flavor:                 "e2e-kcp-md-taints",
		}
	})
})

var _ = ginkgo.Describe("When testing MachinePools [e2e-machine-pool]", func() {
	capie2e.MachinePoolSpec(ctx, func() capie2e.MachinePoolInput {
		return capie2e.MachinePoolInput{
			E2EConfig:              e2eConfig,
			ClusterctlConfigPath:   clusterctlConfigPath,
			BootstrapClusterProxy:  bootstrapClusterProxy,
			ArtifactFolder:         artifactFolder,
			SkipCleanup:            *skipCleanup,
			InfrastructureProvider: ptr.To("crossplane"),
			Flavor:                 ptr.To("e2e-machine-pool"),
		}
	})
})

var _ = ginkgo.Describe("When testing the scale of many clusters [e2e-scale]", func() {
	capie2e.ScaleSpec(ctx, func() capie2e.ScaleSpecInput {
		return capie2e.ScaleSpecInput{
			E2EConfig:              e2eConfig,
			ClusterctlConfigPath:   clusterctlConfigPath,
			BootstrapClusterProxy:  bootstrapClusterProxy,
			ArtifactFolder:         artifactFolder,
			SkipCleanup:            *skipCleanup,
			InfrastructureProvider: ptr.To("crossplane"),
			Flavor:                 ptr.To("e2e-scale"),
			// The clusters share the namespace's ProviderConfig, which
			// reads the plane's workload cluster's kubeconfig.
			PostNamespaceCreated: func(proxy framework.ClusterProxy, ns string) {
				gomega.Expect(proxy.GetClient().Create(ctx, &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scale-workload-kubeconfig"},
					Data:       map[string][]byte{"value": p.Workload.Kubeconfig},
				})).To(gomega.Succeed())
			},
			// CAPI's default of 10 clusters, 5 at a time: each a
			// control-plane Machine and a worker.
			ClusterCount:                    ptr.To[int64](10),
			Concurrency:                     ptr.To[int64](5),
			ControlPlaneMachineCount:        ptr.To[int64](1),
			MachineDeploymentCount:          ptr.To[int64](1),
			WorkerPerMachineDeploymentCount: ptr.To[int64](1),
		}
	})
})

// ownedBy says whether an object has an owner of one of kinds.
func ownedBy(owners []metav1.OwnerReference, kinds ...string) bool {
	return slices.ContainsFunc(owners, func(o metav1.OwnerReference) bool { return slices.Contains(kinds, o.Kind) })
}

var _ = ginkgo.Describe("When following the Cluster API deletion order [e2e-topology-local]", func() {
	capie2e.ClusterDeletionSpec(ctx, func() capie2e.ClusterDeletionSpecInput {
		return capie2e.ClusterDeletionSpecInput{
			E2EConfig:                e2eConfig,
			ClusterctlConfigPath:     clusterctlConfigPath,
			BootstrapClusterProxy:    bootstrapClusterProxy,
			ArtifactFolder:           artifactFolder,
			SkipCleanup:              *skipCleanup,
			InfrastructureProvider:   ptr.To("crossplane"),
			Flavor:                   ptr.To(flavor),
			ControlPlaneMachineCount: ptr.To[int64](1),
			// CAPI's order: the workers, then the control plane, then the
			// cluster's infrastructure XR, each phase blocked by the test
			// until it has seen the previous one gone.
			ClusterDeletionPhases: []capie2e.ClusterDeletionPhase{
				{
					ObjectFilter: func(ref corev1.ObjectReference, owners []metav1.OwnerReference) bool {
						if ref.Kind == "Machine" && ownedBy(owners, "MachineDeployment", "MachineSet") {
							return true
						}
						return ref.Kind == "MachineDeployment" || ref.Kind == "MachineSet"
					},
					BlockingObjectFilter: func(ref corev1.ObjectReference, _ []metav1.OwnerReference) bool { return ref.Kind == "Machine" },
				},
				{
					ObjectFilter: func(ref corev1.ObjectReference, owners []metav1.OwnerReference) bool {
						if ref.Kind == "Machine" && ownedBy(owners, "KubeadmControlPlane") {
							return true
						}
						return ref.Kind == "KubeadmControlPlane"
					},
					BlockingObjectFilter: func(ref corev1.ObjectReference, _ []metav1.OwnerReference) bool { return ref.Kind == "Machine" },
				},
				{
					ObjectFilter: func(ref corev1.ObjectReference, _ []metav1.OwnerReference) bool {
						return ref.Kind == "CrossplaneCluster"
					},
					BlockingObjectFilter: func(ref corev1.ObjectReference, _ []metav1.OwnerReference) bool {
						return ref.Kind == "CrossplaneCluster"
					},
				},
			},
		}
	})
})

var _ = ginkgo.Describe("When testing unhealthy machines remediation [e2e-md-remediation]", func() {
	capie2e.MachineDeploymentRemediationSpec(ctx, func() capie2e.MachineDeploymentRemediationSpecInput {
		return capie2e.MachineDeploymentRemediationSpecInput{
			E2EConfig:              e2eConfig,
			ClusterctlConfigPath:   clusterctlConfigPath,
			BootstrapClusterProxy:  bootstrapClusterProxy,
			ArtifactFolder:         artifactFolder,
			SkipCleanup:            *skipCleanup,
			InfrastructureProvider: ptr.To("crossplane"),
			Flavor:                 ptr.To("e2e-md-remediation"),
		}
	})
})

var _ = ginkgo.Describe("When testing ClusterClass changes [e2e-topology-local]", func() {
	capie2e.ClusterClassChangesSpec(ctx, func() capie2e.ClusterClassChangesSpecInput {
		return capie2e.ClusterClassChangesSpecInput{
			E2EConfig:              e2eConfig,
			ClusterctlConfigPath:   clusterctlConfigPath,
			BootstrapClusterProxy:  bootstrapClusterProxy,
			ArtifactFolder:         artifactFolder,
			SkipCleanup:            *skipCleanup,
			InfrastructureProvider: ptr.To("crossplane"),
			Flavor:                 flavor,
			// Set on the ClusterClass's templates after the Cluster is
			// created; the spec waits for each to reach the objects of the
			// topology.
			ModifyControlPlaneFields: map[string]any{
				"spec.kubeadmConfigSpec.verbosity": int64(4),
			},
			ModifyMachineDeploymentBootstrapConfigTemplateFields: map[string]any{
				"spec.template.spec.verbosity": int64(4),
			},
			ModifyMachineDeploymentInfrastructureMachineTemplateFields: map[string]any{
				"spec.template.spec.parameters.size": "medium",
			},
		}
	})
})

var _ = ginkgo.Describe("When testing KCP adoption [e2e-kcp-adoption]", func() {
	capie2e.KCPAdoptionSpec(ctx, func() capie2e.KCPAdoptionSpecInput {
		return capie2e.KCPAdoptionSpecInput{
			E2EConfig:              e2eConfig,
			ClusterctlConfigPath:   clusterctlConfigPath,
			BootstrapClusterProxy:  bootstrapClusterProxy,
			ArtifactFolder:         artifactFolder,
			SkipCleanup:            *skipCleanup,
			InfrastructureProvider: ptr.To("crossplane"),
			Flavor:                 ptr.To("e2e-kcp-adoption"),
		}
	})
})

var _ = ginkgo.Describe("When testing ClusterClass rollouts [e2e-topology-taints]", func() {
	capie2e.ClusterClassRolloutSpec(ctx, func() capie2e.ClusterClassRolloutSpecInput {
		return capie2e.ClusterClassRolloutSpecInput{
			E2EConfig:                      e2eConfig,
			ClusterctlConfigPath:           clusterctlConfigPath,
			BootstrapClusterProxy:          bootstrapClusterProxy,
			ArtifactFolder:                 artifactFolder,
			SkipCleanup:                    *skipCleanup,
			InfrastructureProvider:         ptr.To("crossplane"),
			Flavor:                         "e2e-topology-taints",
			FilterMetadataBeforeValidation: withoutEngineMetadata,
		}
	})
})

// Its Deployments, disruption budgets and Pods held by finalizers run on the
// workload cluster's simulated Nodes: the plane's kube-scheduler places them,
// kube-controller-manager runs their Deployments and budgets, and kwok
// terminates an evicted Pod a finalizer holds, as a kubelet would. As in
// CAPI's own run, each Node of the cluster also gets an attached
// VolumeAttachment, which holds its Machine's deletion until the spec lets
// the wait for volume detachment time out.
var _ = ginkgo.Describe("When testing Node drain [e2e-topology-local]", func() {
	capie2e.NodeDrainTimeoutSpec(ctx, func() capie2e.NodeDrainTimeoutSpecInput {
		return capie2e.NodeDrainTimeoutSpecInput{
			E2EConfig:                 e2eConfig,
			ClusterctlConfigPath:      clusterctlConfigPath,
			BootstrapClusterProxy:     bootstrapClusterProxy,
			ArtifactFolder:            artifactFolder,
			SkipCleanup:               *skipCleanup,
			InfrastructureProvider:    ptr.To("crossplane"),
			Flavor:                    ptr.To(flavor),
			VerifyNodeVolumeDetach:    true,
			CreateAdditionalResources: attachVolumes,
		}
	})
})

// volumeAttachmentFinalizer holds the VolumeAttachments attachVolumes
// creates.
const volumeAttachmentFinalizer = "test.capxp.dev/attached"

// attachVolumes creates an attached VolumeAttachment for the Node of each of
// a cluster's Machines, held by a finalizer so that it outlives the Node, and
// removes them when the spec ends: the workload cluster is the plane's, and
// later specs' Nodes share it.
func attachVolumes(ctx context.Context, mgmt framework.ClusterProxy, cluster *clusterv1.Cluster) {
	workload := mgmt.GetWorkloadCluster(ctx, cluster.Namespace, cluster.Name).GetClient()
	machines := &clusterv1.MachineList{}
	gomega.Expect(mgmt.GetClient().List(ctx, machines, client.InNamespace(cluster.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name})).To(gomega.Succeed())
	var names []string
	for i := range machines.Items {
		m := &machines.Items[i]
		gomega.Expect(m.Status.NodeRef.IsDefined()).To(gomega.BeTrue(), "Machine %s has no Node", m.Name)
		va := &storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: "capxp-e2e-" + m.Status.NodeRef.Name, Finalizers: []string{volumeAttachmentFinalizer}},
			Spec: storagev1.VolumeAttachmentSpec{
				Attacher: "e2e.capxp.dev",
				NodeName: m.Status.NodeRef.Name,
				Source:   storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("capxp-e2e")},
			},
		}
		gomega.Expect(workload.Create(ctx, va)).To(gomega.Succeed())
		va.Status.Attached = true
		gomega.Expect(workload.Status().Update(ctx, va)).To(gomega.Succeed())
		names = append(names, va.Name)
	}
	ginkgo.DeferCleanup(func(ctx context.Context) {
		for _, name := range names {
			va := &storagev1.VolumeAttachment{}
			err := workload.Get(ctx, client.ObjectKey{Name: name}, va)
			if apierrors.IsNotFound(err) {
				continue
			}
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			patch := client.MergeFrom(va.DeepCopy())
			va.Finalizers = nil
			gomega.Expect(workload.Patch(ctx, va, patch)).To(gomega.Succeed())
			gomega.Expect(client.IgnoreNotFound(workload.Delete(ctx, va))).To(gomega.Succeed())
		}
	})
}

// withoutEngineMetadata is an object's labels and annotations without those
// the composition engine writes on an XR (Crossplane's crossplane.io/ and
// CAPXP's capxp.dev/ keys) and the block-move annotation the bridge holds
// while provisioning: the spec's input for "additional infrastructure
// provider specific labels". Everything CAPI propagates stays.
func withoutEngineMetadata(o client.Object) clusterv1.ObjectMeta {
	keep := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			domain, _, _ := strings.Cut(k, "/")
			if strings.HasSuffix(domain, "crossplane.io") || strings.HasSuffix(domain, "capxp.dev") || k == infrav1.BlockMoveAnnotation {
				continue
			}
			out[k] = v
		}
		return out
	}
	return clusterv1.ObjectMeta{Labels: keep(o.GetLabels()), Annotations: keep(o.GetAnnotations())}
}

// Runs on a plane of its own, with CAPI's in-place updates on
// (-capxp.in-place-updates -ginkgo.label-filter=in-place): CAPXP's hooks
// answer the files the spec writes through the ClusterClass, which the
// local Composition declares its hosts apply, and the machines are kept.
var _ = ginkgo.Describe("When testing in-place updates [e2e-in-place]", ginkgo.Label("in-place"), func() {
	capie2e.ClusterInPlaceUpdateSpec(ctx, func() capie2e.ClusterInPlaceUpdateSpecInput {
		return capie2e.ClusterInPlaceUpdateSpecInput{
			E2EConfig:              e2eConfig,
			ClusterctlConfigPath:   clusterctlConfigPath,
			BootstrapClusterProxy:  bootstrapClusterProxy,
			ArtifactFolder:         artifactFolder,
			SkipCleanup:            *skipCleanup,
			InfrastructureProvider: ptr.To("crossplane"),
			Flavor:                 ptr.To("e2e-in-place"),
			// CAPXP's manager registers its own ExtensionConfig: the spec
			// deploys no test extension.
		}
	})
})
