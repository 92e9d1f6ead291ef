//go:build e2e

package capie2e

import (
	"github.com/onsi/ginkgo/v2"
	"k8s.io/utils/ptr"
	capie2e "sigs.k8s.io/cluster-api/test/e2e"
)

// flavor is the suite's flavor of the local backend with kubeadm's
// providers (data/cluster-template-e2e-topology-local.yaml).
const flavor = "e2e-topology-local"

var _ = ginkgo.Describe("When following the Cluster API quick-start [e2e-topology-local]", func() {
	capie2e.QuickStartSpec(ctx, func() capie2e.QuickStartSpecInput {
		return capie2e.QuickStartSpecInput{
			E2EConfig:              e2eConfig,
			ClusterctlConfigPath:   clusterctlConfigPath,
			BootstrapClusterProxy:  bootstrapClusterProxy,
			ArtifactFolder:         artifactFolder,
			SkipCleanup:            *skipCleanup,
			InfrastructureProvider: ptr.To("crossplane"),
			Flavor:                 ptr.To(flavor),
		}
	})
})
