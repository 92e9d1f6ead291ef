package integration

import (
	"encoding/json"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/controllers"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// credsGroup is the test provider's API group (test/envtest/testdata/crds).
const credsGroup = "creds.test.capxp.dev"

// providerConfig creates a namespaced ProviderConfig whose credentials come
// from a Secret, and the Secret when withSecret.
func providerConfig(t *testing.T, ns, name string, withSecret bool) {
	t.Helper()
	credentialsConfig(t, "ProviderConfig", ns, name, withSecret)
}

// clusterProviderConfig creates a shared ClusterProviderConfig and its
// Secret in secretNS.
func clusterProviderConfig(t *testing.T, name, secretNS string) {
	t.Helper()
	credentialsConfig(t, "ClusterProviderConfig", secretNS, name, true)
}

func credentialsConfig(t *testing.T, kind, ns, name string, withSecret bool) {
	g := NewWithT(t)
	secretRef := map[string]any{"name": name + "-creds", "key": "credentials"}
	cfg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": credsGroup + "/v1beta1", "kind": kind,
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"credentials": map[string]any{"source": "Secret", "secretRef": secretRef}},
	}}
	if kind == "ProviderConfig" {
		cfg.SetNamespace(ns)
	} else {
		secretRef["namespace"] = ns
	}
	g.Expect(env.Client.Create(ctx, cfg)).To(Succeed())
	if withSecret {
		g.Expect(env.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-creds"},
			Data:       map[string][]byte{"credentials": []byte("[default]\naws_access_key_id = test\n")},
		})).To(Succeed())
	}
}

func grantTo(t *testing.T, name, config string, allowed infrav1.AllowedNamespaces) *infrav1.ClusterProviderConfigGrant {
	t.Helper()
	g := &infrav1.ClusterProviderConfigGrant{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: infrav1.ClusterProviderConfigGrantSpec{
			ProviderConfigRef: &infrav1.ClusterProviderConfigReference{APIGroup: credsGroup, Name: config},
			AllowedNamespaces: allowed,
		},
	}
	NewWithT(t).Expect(env.Client.Create(ctx, g)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, g) })
	return g
}

// clusterUsing creates a Cluster whose XR names the given credentials; both
// carry labels.
func clusterUsing(t *testing.T, ns, name string, kind infrav1.ProviderConfigKind, config string, labels map[string]string) (*unstructured.Unstructured, error) {
	t.Helper()
	xr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"providerConfigRef": map[string]any{"apiGroup": credsGroup, "kind": string(kind), "name": config},
	}}}
	xr.SetGroupVersionKind(clusterGVK)
	xr.SetNamespace(ns)
	xr.SetName(name)
	xr.SetAnnotations(map[string]string{envtest.ObserveAnnotation: script(goodStatus)})
	xr.SetLabels(labels)
	if err := env.Client.Create(ctx, xr); err != nil {
		return nil, err
	}
	cluster := capiCluster(ns, name)
	cluster.Labels = labels
	NewWithT(t).Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	return xr, nil
}

// grantedClusterProviderConfig is a new ClusterProviderConfig granted to
// the namespace alone, named prefix and a suffix unique to the namespace,
// once the credentials webhook answers for it; it returns the config's name
// and its grant.
func grantedClusterProviderConfig(t *testing.T, prefix, ns string) (string, *infrav1.ClusterProviderConfigGrant) {
	t.Helper()
	config := prefix + uniqueGroup(ns, "")
	clusterProviderConfig(t, config, ns)
	grant := grantTo(t, config, config, infrav1.AllowedNamespaces{Names: []string{ns}})
	waitForCredentialsWebhook(t, ns)
	return config, grant
}

// tenantBesideSharedCredentials is a new tenant namespace, a suffix unique
// to it, and two ClusterProviderConfigs it names: one to be granted to it,
// one never.
func tenantBesideSharedCredentials(t *testing.T) (ns, suffix, granted, ungranted string) {
	t.Helper()
	ns = tenant(t, nil)
	suffix = uniqueGroup(ns, "")
	granted, ungranted = "granted"+suffix, "ungranted"+suffix
	clusterProviderConfig(t, granted, ns)
	clusterProviderConfig(t, ungranted, ns)
	return ns, suffix, granted, ungranted
}

// enforcingStack runs the bridge enforcing the test provider's
// credentials; its credentials policies go when the test ends.
func enforcingStack(t *testing.T) *envtest.Manager {
	t.Helper()
	m := stackWith(t, controllers.Options{CredentialsProviders: []credentials.Provider{testProvider}})
	removeCredentialsPolicies(t)
	return m
}

// grantedTenant runs enforcingStack and returns tenantBesideSharedCredentials'
// namespace, suffix and configs, with the grant of the first to the
// namespace.
func grantedTenant(t *testing.T) (ns, suffix, granted, ungranted string, grant *infrav1.ClusterProviderConfigGrant) {
	t.Helper()
	enforcingStack(t)
	ns, suffix, granted, ungranted = tenantBesideSharedCredentials(t)
	grant = grantTo(t, "granted"+suffix, granted, infrav1.AllowedNamespaces{Names: []string{ns}})
	return ns, suffix, granted, ungranted, grant
}

func tenant(t *testing.T, labels map[string]string) string {
	t.Helper()
	g := NewWithT(t)
	ns := namespace(t)
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	change(g, n, func() {
		for k, v := range labels {
			n.Labels[k] = v
		}
	})
	return ns
}

// Each tenant may use its own ProviderConfigs and exactly the shared
// ClusterProviderConfigs granted to its namespace; the rest never compose.
func TestTenantsUseOnlyTheCredentialsGrantedToThem(t *testing.T) {
	stack(t)
	suffix := uniqueGroup(namespace(t), "")
	shared, gold, nobody := "shared"+suffix, "gold"+suffix, "nobody"+suffix
	teamA := tenant(t, map[string]string{"tier": "gold"})
	teamB := tenant(t, map[string]string{"tier": "silver"})
	teamC := tenant(t, nil)
	for _, c := range []string{shared, gold, nobody} {
		clusterProviderConfig(t, c, teamC)
	}
	grantTo(t, "shared-to-a"+suffix, shared, infrav1.AllowedNamespaces{Names: []string{teamA}})
	grantTo(t, "gold-tier"+suffix, gold, infrav1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}})
	grantTo(t, "everyone"+suffix, nobody, infrav1.AllowedNamespaces{Selector: &metav1.LabelSelector{}})

	type combo struct {
		ns     string
		kind   infrav1.ProviderConfigKind
		config string
		want   bool
	}
	var combos []combo
	for _, ns := range []string{teamA, teamB, teamC} {
		providerConfig(t, ns, "own", true)
		combos = append(combos,
			combo{ns, infrav1.ProviderConfigKindNamespaced, "own", true},
			combo{ns, infrav1.ProviderConfigKindCluster, shared, ns == teamA},
			combo{ns, infrav1.ProviderConfigKindCluster, gold, ns == teamA},
			combo{ns, infrav1.ProviderConfigKindCluster, nobody, false},
		)
	}
	waitForCredentialsWebhook(t, teamC)

	for i, c := range combos {
		t.Run(fmt.Sprintf("%d %s uses %s %s", i, c.ns, c.kind, c.config), func(t *testing.T) {
			g := NewWithT(t)
			xr, err := clusterUsing(t, c.ns, fmt.Sprintf("c%d", i), c.kind, c.config, nil)
			if !c.want {
				// Refused at admission, naming the missing grant.
				g.Expect(err).To(MatchError(And(
					ContainSubstring(fmt.Sprintf("namespace %s may not use ClusterProviderConfig %s/%s: no ClusterProviderConfigGrant allows it", c.ns, credsGroup, c.config)),
					ContainSubstring(fmt.Sprintf("a ClusterProviderConfigGrant with providerConfigRef %s/%s covering namespace %s is missing", credsGroup, c.config, c.ns)),
				)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Eventually(func(g Gomega) {
				g.Expect(provisioned(getXR(g, xr))).To(BeTrue(), "composed with the credentials")
				noVerdict(g, getCluster(g, capiCluster(c.ns, xr.GetName())))
			}, timeout, interval).Should(Succeed())
		})
	}
}

// waitForCredentialsWebhook waits until the API server calls the bridge's
// credentials webhook: the bridge registers it as it adapts the XRDs, and the
// API server picks registrations up asynchronously.
func waitForCredentialsWebhook(t *testing.T, ns string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		probe := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"providerConfigRef": map[string]any{"apiGroup": credsGroup, "kind": "ClusterProviderConfig", "name": "probe-never-granted"},
		}}}
		probe.SetGroupVersionKind(clusterGVK)
		probe.SetNamespace(ns)
		probe.SetGenerateName("probe-")
		err := env.Client.Create(ctx, probe)
		if err == nil {
			_ = env.Client.Delete(ctx, probe)
		}
		g.Expect(err).To(MatchError(ContainSubstring("probe-never-granted")))
	}, timeout, interval).Should(Succeed())
}

// Revoking a grant stops composition with those credentials: the XR says
// why and is paused; granting again resumes it. Grants wake the XRs they
// concern also when the manager watches only the objects CAPI's watch filter
// label selects: grants carry no such label.
func TestRevokingAGrantPausesTheXR(t *testing.T) {
	for name, filter := range map[string]string{"every-cluster": "", "watch-filter": "team-x"} {
		t.Run(name, func(t *testing.T) { revokeAndRegrant(t, filter) })
	}
}

func revokeAndRegrant(t *testing.T, filter string) {
	stackWith(t, controllers.Options{WatchFilter: filter})
	g := NewWithT(t)
	ns := tenant(t, nil)
	var labels map[string]string
	if filter != "" {
		labels = map[string]string{clusterv1.WatchLabel: filter}
	}
	config, grant := grantedClusterProviderConfig(t, "revocable", ns)
	xr, err := clusterUsing(t, ns, "revoked", infrav1.ProviderConfigKindCluster, config, labels)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) { g.Expect(provisioned(getXR(g, xr))).To(BeTrue()) }, timeout, interval).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, grant)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := getXR(g, xr)
		g.Expect(got.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
		g.Expect(xrCondition(got, "Synced")).To(HaveKeyWithValue("reason", "ReconcilePaused"), "nothing new is composed")
		g.Expect(provisioned(got)).To(BeTrue(), "the provisioned milestone stays while held")
		cc := infraCondition(g, getCluster(g, capiCluster(ns, "revoked")))
		g.Expect(cc.Reason).To(Equal(infrav1.ProviderConfigNotGrantedReason))
		g.Expect(cc.Message).To(ContainSubstring("no ClusterProviderConfigGrant allows it"))
	}, timeout, interval).Should(Succeed())

	grantTo(t, "regranted"+uniqueGroup(ns, ""), config, infrav1.AllowedNamespaces{Names: []string{ns}})
	g.Eventually(func(g Gomega) {
		got := getXR(g, xr)
		g.Expect(infraCondition(g, getCluster(g, capiCluster(ns, "revoked"))).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(got.GetAnnotations()).NotTo(HaveKey(infrav1.CrossplanePausedAnnotation))
	}, timeout, interval).Should(Succeed())
}

// Credentials that cannot work are named: a ProviderConfig of another
// namespace is never looked up there, and a missing credentials Secret is
// reported.
func TestUnusableCredentialsAreReported(t *testing.T) {
	stack(t)
	teamA := tenant(t, nil)
	teamB := tenant(t, nil)
	providerConfig(t, teamB, "theirs", true)
	providerConfig(t, teamA, "no-secret", false)
	// A tenant's own ProviderConfig pointing at a Secret of another
	// namespace, which exists: whether it exists is not the tenant's to learn.
	g := NewWithT(t)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "elsewhere-creds"},
		Data:       map[string][]byte{"credentials": []byte("x")},
	})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": credsGroup + "/v1beta1", "kind": "ProviderConfig",
		"metadata": map[string]any{"name": "elsewhere", "namespace": teamA},
		"spec": map[string]any{"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{
			"name": "elsewhere-creds", "namespace": teamB, "key": "credentials",
		}}},
	}})).To(Succeed())
	cases := map[string]struct {
		config string
		reason string
		want   string
	}{
		"another-namespaces-provider-config": {
			config: "theirs",
			reason: infrav1.ProviderConfigNotFoundReason,
			want:   fmt.Sprintf("spec.providerConfigRef: ProviderConfig %s/theirs not found in namespace %s", credsGroup, teamA),
		},
		"secret-of-another-namespace": {
			config: "elsewhere",
			reason: infrav1.SecretOutsideNamespaceReason,
			want: fmt.Sprintf("ProviderConfig elsewhere spec.credentials.secretRef names namespace %s; a ProviderConfig in namespace %s may only use Secrets of its own namespace",
				teamB, teamA),
		},
		"missing-secret": {
			config: "no-secret",
			reason: infrav1.CredentialsSecretNotFoundReason,
			want:   fmt.Sprintf("Secret %s/no-secret-creds named by ProviderConfig no-secret spec.credentials.secretRef does not exist", teamA),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			xr, err := clusterUsing(t, teamA, name, infrav1.ProviderConfigKindNamespaced, tc.config, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Eventually(func(g Gomega) {
				got := getXR(g, xr)
				c := infraCondition(g, getCluster(g, capiCluster(teamA, name)))
				g.Expect(c.Reason).To(Equal(tc.reason))
				g.Expect(c.Message).To(Equal(tc.want))
				g.Expect(got.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
			}, timeout, interval).Should(Succeed())
		})
	}
}

// A single-tenant management cluster can turn grants off with one manager
// flag: every namespace may then use every ClusterProviderConfig.
func TestSingleTenantClustersNeedNoGrants(t *testing.T) {
	g := NewWithT(t)
	capi, err := env.StartCAPI(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	bridge, err := env.StartBridgeAs(ctx, env.Config, controllers.Options{SharedCredentialsForAllNamespaces: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		g.Expect(bridge.Stop()).To(Succeed())
		g.Expect(capi.Stop()).To(Succeed())
	})
	ns := tenant(t, nil)
	config := "ungranted" + uniqueGroup(ns, "")
	clusterProviderConfig(t, config, ns)
	var xr *unstructured.Unstructured
	g.Eventually(func(g Gomega) {
		// The webhook registration of an earlier manager may still be
		// served by this one a moment after it starts.
		var err error
		xr, err = clusterUsing(t, ns, "single-tenant", infrav1.ProviderConfigKindCluster, config, nil)
		g.Expect(err).NotTo(HaveOccurred())
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(provisioned(getXR(g, xr))).To(BeTrue(), "composed with the shared credentials")
	}, timeout, interval).Should(Succeed())
}

// An XR held paused because its grant was revoked is still deleted
// completely: the bridge releases it to Crossplane (which checks its pause
// before it handles a deletion), deletes what it composed, and both
// finalizers go.
func TestAnXRHeldForCredentialsIsDeletedCompletely(t *testing.T) {
	stack(t)
	g := NewWithT(t)
	ns := tenant(t, nil)
	config, grant := grantedClusterProviderConfig(t, "held", ns)
	xr, err := clusterUsing(t, ns, "held", infrav1.ProviderConfigKindCluster, config, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		got := getXR(g, xr)
		g.Expect(provisioned(got)).To(BeTrue())
		g.Expect(got.GetFinalizers()).To(ContainElement("composite.apiextensions.crossplane.io"), "Crossplane holds it too")
	}, timeout, interval).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, grant)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := getXR(g, xr)
		g.Expect(got.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
		g.Expect(xrCondition(got, "Synced")).To(HaveKeyWithValue("reason", "ReconcilePaused"))
	}, timeout, interval).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, capiCluster(ns, "held"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, s := range stubs(g, ns) {
			if !s.GetDeletionTimestamp().IsZero() {
				release(g, &s)
			}
		}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(xr), getEmpty(xr))
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the held XR is gone")
	}, timeout, interval).Should(Succeed())
}

// A tenant's XR with no CAPI owner that has composed, its credentials
// changed by the tenant to others its namespace may use, is held at
// admission and released once the bridge has judged them: the hold marks
// the pause it adds on such an update, and the bridge lifts the pauses it
// marked. Any other pause of such an XR stays. The tenant cannot mark a
// pause of its own for the bridge to lift.
func TestAnUnownedXRWhoseCredentialsChangeIsReleased(t *testing.T) {
	stack(t)
	ns, suffix, granted, _ := tenantBesideSharedCredentials(t)
	providerConfig(t, ns, "own", true)
	grantTo(t, "granted"+suffix, granted, infrav1.AllowedNamespaces{Names: []string{ns}})
	waitForCredentialsWebhook(t, ns)
	tc := tenantClient(t, ns)
	waitForHold(t, tc, ns)
	ref := func(kind, name string) map[string]any {
		return map[string]any{"apiGroup": credsGroup, "kind": kind, "name": name}
	}
	cases := map[string]struct {
		from, to map[string]any
	}{
		"shared-to-own": {from: ref("ClusterProviderConfig", granted), to: ref("ProviderConfig", "own")},
		"own-to-shared": {from: ref("ProviderConfig", "own"), to: ref("ClusterProviderConfig", granted)},
	}
	for name, tc2 := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			xr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"providerConfigRef": tc2.from}}}
			xr.SetGroupVersionKind(clusterGVK)
			xr.SetNamespace(ns)
			xr.SetName(name)
			xr.SetAnnotations(map[string]string{envtest.ObserveAnnotation: script(goodStatus)})
			g.Expect(tc.Create(ctx, xr)).To(Succeed())
			composedAndRunning := func(g Gomega) {
				got := getXR(g, xr)
				g.Expect(got.GetAnnotations()).NotTo(HaveKey(infrav1.CrossplanePausedAnnotation), "released")
				refs, _, _ := unstructured.NestedSlice(got.Object, "spec", "crossplane", "resourceRefs")
				g.Expect(refs).NotTo(BeEmpty(), "composed")
			}
			g.Eventually(composedAndRunning, timeout, interval).Should(Succeed())

			raw, err := json.Marshal(map[string]any{"spec": map[string]any{"providerConfigRef": tc2.to}})
			g.Expect(err).NotTo(HaveOccurred())
			changed := getXR(g, xr)
			g.Expect(tc.Patch(ctx, changed, client.RawPatch(types.MergePatchType, raw))).To(Succeed())
			g.Expect(changed.GetAnnotations()).To(And(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"), HaveKeyWithValue(infrav1.CredentialsHoldAnnotation, "true")),
				"held and marked at admission")
			g.Eventually(composedAndRunning, timeout, interval).Should(Succeed())
			g.Expect(getXR(g, xr).Object["spec"].(map[string]any)["providerConfigRef"]).To(Equal(tc2.to))

			// A pause of the tenant's own, marked in the same write, is
			// refused: nothing changed its credentials.
			mark, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
				infrav1.CrossplanePausedAnnotation: "true", infrav1.CredentialsHoldAnnotation: "true"}}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tc.Patch(ctx, getXR(g, xr), client.RawPatch(types.MergePatchType, mark))).To(MatchError(ContainSubstring("only CAPXP marks the holds it lifts")))
		})
	}
}
