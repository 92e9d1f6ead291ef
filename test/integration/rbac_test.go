package integration

import (
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// readClusterRole reads a ClusterRole manifest of this repository.
func readClusterRole(t *testing.T, path string) *rbacv1.ClusterRole {
	t.Helper()
	raw, err := os.ReadFile(envtest.RepoRoot() + "/" + path)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	r := &rbacv1.ClusterRole{}
	NewWithT(t).Expect(yaml.Unmarshal(raw, r)).To(Succeed())
	return r
}

func bind(t *testing.T, user, role string) {
	t.Helper()
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: role + "-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	NewWithT(t).Expect(env.Client.Create(ctx, b)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, b) })
}

// The manager needs nothing beyond its generated role, plus what a platform
// team aggregates for its own kinds: run as a user bound to exactly that, the
// bridge adapts the XRDs, checks credentials, provisions a cluster and tears
// it down.
func TestTheManagerNeedsOnlyItsGeneratedRole(t *testing.T) {
	g := NewWithT(t)
	role := readClusterRole(t, "config/rbac/role.yaml")
	if err := env.Client.Create(ctx, role); !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	aggregated := readClusterRole(t, "config/rbac/aggregated.yaml")
	if err := env.Client.Create(ctx, aggregated); !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	// What a platform team would aggregate for these tests' kinds: the
	// composed Stubs, and the test provider's
	// credentials kinds. envtest runs no aggregation controller, so the
	// test binds it directly.
	extras := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "capxp-test-extras-", Labels: map[string]string{"capxp.dev/aggregate-to-manager": "true"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{envtest.StubGVK.Group}, Resources: []string{"stubs"}, Verbs: []string{"get", "list", "watch", "delete"}},
			{APIGroups: []string{credsGroup}, Resources: []string{"providerconfigs", "clusterproviderconfigs"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	g.Expect(env.Client.Create(ctx, extras)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, extras) })

	user := "capxp-manager-" + uniqueGroup(namespace(t), "")
	bind(t, user, role.Name)
	bind(t, user, extras.Name)
	cfg, err := env.User(user)
	g.Expect(err).NotTo(HaveOccurred())

	capi, err := env.StartCAPI(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	bridge, err := env.StartBridgeAs(ctx, cfg, controllers.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		g.Expect(bridge.Stop()).To(Succeed())
		g.Expect(capi.Stop()).To(Succeed())
	})

	ns := namespace(t)
	providerConfig(t, ns, "team", true)
	xr, err := clusterUsing(t, ns, "least", infrav1.ProviderConfigKindNamespaced, "team", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		g.Expect(provisioned(getXR(g, xr))).To(BeTrue())
	}, timeout, interval).Should(Succeed())

	cluster := capiCluster(ns, "least")
	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	g.Eventually(func(g Gomega) {
		composed := composedOf(g, xr)
		g.Expect(composed.GetDeletionTimestamp().IsZero()).To(BeFalse())
		release(g, composed)
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(stubs(g, ns)).To(BeEmpty(), "the composed resource is gone")
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(xr.GroupVersionKind())
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(xr), got)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the XR is gone: %v", got.Object["metadata"])
	}, timeout, interval).Should(Succeed())

	// Nothing failed for want of a permission along the way.
	g.Consistently(func() int { return bridge.Forbidden() }, 500*time.Millisecond, interval).Should(BeZero())
}
