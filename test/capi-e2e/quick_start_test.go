//go:build e2e

package capie2e

import (
	"context"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capie2e "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// flavor is the suite's flavor of the local backend with kubeadm's
// providers (data/cluster-template-e2e-topology-local.yaml).
const flavor = "e2e-topology-local"

// clusterSecrets gives every Cluster a spec creates in a namespace what the
// local backend's kubeadm flavors ask to find before they are applied
// (plane.KubeadmClusterSecrets: the workload cluster's kubeconfig, its
// etcd's CA and client certificate). The specs name their clusters
// themselves, so the suite watches each spec's namespace for them, as a
// platform's own automation would, until the namespace goes.
func clusterSecrets(proxy framework.ClusterProxy, ns string) {
	c := proxy.GetClient()
	done := map[string]bool{}
	go func() {
		defer ginkgo.GinkgoRecover()
		_ = wait.PollUntilContextCancel(context.Background(), 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			clusters := &clusterv1.ClusterList{}
			if err := c.List(ctx, clusters, client.InNamespace(ns)); err != nil {
				return false, nil //nolint:nilerr // tried again.
			}
			for i := range clusters.Items {
				cl := &clusters.Items[i]
				if done[cl.Name] {
					continue
				}
				secrets, err := p.KubeadmClusterSecrets(ns, cl.Name)
				gomega.Expect(err).NotTo(gomega.HaveOccurred(), "cannot make the Secrets of Cluster %s", cl.Name)
				for _, s := range secrets {
					if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
						return false, nil // tried again.
					}
				}
				done[cl.Name] = true
			}
			// The spec deletes its namespace at the end.
			err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
			return apierrors.IsNotFound(err), nil
		})
	}()
}

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
			PostNamespaceCreated:   clusterSecrets,
		}
	})
})
