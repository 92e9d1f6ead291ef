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

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/xrd"
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
			{APIGroups: []string{envtest.StubGVK.Group}, Resources: []string{"stubs"}, Verbs: []string{"get", "list", "watch", "patch", "delete"}},
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

// A platform team's kind needs the bridge granted it. Until then the XRD
// says which verbs the bridge lacks, and how to grant them; the ClusterRole
// `capxp xrd adopt` prints grants them, and the bridge adapts the kind
// without a restart. The template CRD it prints is one the API server
// takes, immutable as CAPXP's own templates.
func TestAPlatformKindNeedsItsAdoption(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	group := uniqueGroup(ns, "adopt")
	x := platformXRD(t, group, "MetalCluster", "metalclusters")
	crossplane, err := capxp.CrossplaneSchema()
	g.Expect(err).NotTo(HaveOccurred())
	adoption, err := xrd.Adopt(x, crossplane)
	g.Expect(err).NotTo(HaveOccurred())

	role := readClusterRole(t, "config/rbac/role.yaml")
	if err := env.Client.Create(ctx, role); !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	user := "capxp-manager-" + uniqueGroup(ns, "")
	bind(t, user, role.Name)
	cfg, err := env.User(user)
	g.Expect(err).NotTo(HaveOccurred())
	bridge, err := env.StartBridgeAs(ctx, cfg, controllers.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(bridge.Stop()).To(Succeed()) })

	_, err = env.InstallXRD(ctx, x)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		c := xrdCondition(g, x.Name)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(infrav1.ForbiddenReason))
		g.Expect(c.Message).To(And(
			ContainSubstring("may not get metalclusters."+group+", list metalclusters."+group),
			ContainSubstring("patch metalclusters/status."+group),
			ContainSubstring(xrd.AggregateToBridgeLabel),
			ContainSubstring("capxp xrd adopt")))
	}, timeout, interval).Should(Succeed())

	// envtest runs no aggregation controller: bind the adoption's role
	// directly, as aggregation would add its rules to the manager's.
	g.Expect(env.Client.Create(ctx, adoption.Bridge)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, adoption.Bridge) })
	bind(t, user, adoption.Bridge.Name)
	g.Eventually(func(g Gomega) {
		c := xrdCondition(g, x.Name)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(infrav1.ContractAdaptedReason), c.Message)
	}, timeout, interval).Should(Succeed())

	// The template CRD: established, and its objects immutable.
	g.Expect(env.Client.Create(ctx, adoption.TemplateCRD)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, adoption.TemplateCRD) })
	tmpl := &unstructured.Unstructured{}
	tmpl.SetAPIVersion(group + "/v1alpha1")
	tmpl.SetKind("MetalClusterTemplate")
	tmpl.SetNamespace(ns)
	tmpl.SetName("metal")
	tmpl.Object["spec"] = map[string]any{"template": map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"tier": "gold"}},
		"spec": map[string]any{
			"parameters": map[string]any{"region": "eu-west-1"},
			"crossplane": map[string]any{"compositionSelector": map[string]any{"matchLabels": map[string]any{"capxp.dev/backend": "byo"}}},
		},
	}}
	g.Eventually(func() error { return env.Client.Create(ctx, tmpl) }, timeout, interval).Should(Succeed())
	g.Expect(unstructured.SetNestedField(tmpl.Object, "eu-central-1", "spec", "template", "spec", "parameters", "region")).To(Succeed())
	// The bridge's template immutability policy covers the kind's template
	// from when it adapts the kind; the API server enforces it soon after.
	g.Eventually(func() error { return env.Client.Update(ctx, tmpl.DeepCopy(), client.DryRunAll) }, timeout, interval).Should(HaveOccurred())
	err = env.Client.Update(ctx, tmpl)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("MetalClusterTemplate spec is immutable"))
}
