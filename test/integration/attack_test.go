package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// tenantClient is a client acting as a tenant user bound, in its namespace
// only, to exactly the shipped tenant role (config/rbac/tenant.yaml), plus the
// same rule for the test provider's ProviderConfigs that the role has for the
// shipped providers'.
func tenantClient(t *testing.T, ns string) client.Client {
	t.Helper()
	g := NewWithT(t)
	role := readClusterRole(t, "config/rbac/tenant.yaml")
	role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{credsGroup}, Resources: []string{"providerconfigs"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}})
	role.Name = "capxp-tenant-" + ns
	g.Expect(env.Client.Create(ctx, role)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, role) })
	user := "tenant-of-" + ns
	g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	})).To(Succeed())
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// waitForHold waits until a new XR the tenant creates in ns comes back
// held: the API server loads the bridge's admission policies
// asynchronously.
func waitForHold(t *testing.T, tc client.Client, ns string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		probe := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
		probe.SetGroupVersionKind(clusterGVK)
		probe.SetNamespace(ns)
		probe.SetGenerateName("probe-")
		g.Expect(tc.Create(ctx, probe, client.DryRunAll)).To(Succeed())
		g.Expect(probe.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
	}, timeout, interval).Should(Succeed())
}

// A hostile tenant, with exactly the documented permissions, tries every
// other way it has to compose with credentials its namespace was not
// granted: lifting the hold the bridge keeps on what it creates, declaring
// its XR externally managed, its own ProviderConfig acting with the
// provider's ambient identity, changing credentials after admission, and
// resource references naming what it does not own. Each attempt gets a
// clear refusal or a held XR naming the missing grant; no Stub Crossplane
// composes in the namespace names the ungranted credentials; and a grant
// revoked mid-flight pauses the Stubs already composed within 5 s.
func TestAHostileTenantComposesNothingUngranted(t *testing.T) {
	stack(t)
	g := NewWithT(t)
	ns, suffix, granted, ungranted := tenantBesideSharedCredentials(t)
	grant := grantTo(t, "granted"+suffix, granted, infrav1.AllowedNamespaces{Names: []string{ns}})
	waitForCredentialsWebhook(t, ns)
	tc := tenantClient(t, ns)
	waitForHold(t, tc, ns)

	ref := func(kind, name string) map[string]any {
		return map[string]any{"apiGroup": credsGroup, "kind": kind, "name": name}
	}
	newXR := func(name string, spec map[string]any, annotations map[string]string) *unstructured.Unstructured {
		xr := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		xr.SetGroupVersionKind(clusterGVK)
		xr.SetNamespace(ns)
		xr.SetName(name)
		a := map[string]string{envtest.ObserveAnnotation: script(goodStatus)}
		for k, v := range annotations {
			a[k] = v
		}
		xr.SetAnnotations(a)
		return xr
	}
	held := func(g Gomega, xr *unstructured.Unstructured, reason string) {
		got := getXR(g, xr)
		g.Expect(got.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"), "%s is held", xr.GetName())
		g.Expect(xrCondition(got, "Synced")).To(HaveKeyWithValue("reason", "ReconcilePaused"), "%s composes nothing", xr.GetName())
		if reason != "" {
			g.Expect(warnings(g, ns, xr.GetName())).To(ContainElement(ContainSubstring(reason)))
		}
	}

	// Its own ProviderConfig, acting with the provider's ambient identity.
	g.Expect(tc.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": credsGroup + "/v1beta1", "kind": "ProviderConfig",
		"metadata": map[string]any{"name": "ambient", "namespace": ns},
		"spec":     map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}},
	}})).To(Succeed(), "a tenant may write its own ProviderConfigs")
	ambient := newXR("ambient", map[string]any{"providerConfigRef": ref("ProviderConfig", "ambient")}, nil)
	g.Expect(tc.Create(ctx, ambient)).To(Succeed())

	// Externally managed: CAPI's fields are another's to write, but the
	// credentials are still checked. (The webhook refuses a new shared
	// reference at admission; the tenant creates the XR with its own
	// ambient config and is held all the same.)
	external := newXR("external", map[string]any{"providerConfigRef": ref("ProviderConfig", "ambient")},
		map[string]string{clusterv1.ManagedByAnnotation: "someone-else"})
	g.Expect(tc.Create(ctx, external)).To(Succeed())

	// Granted credentials first, changed after admission to ungranted ones
	// by a whole-object update, as kubectl replace sends it (the webhook
	// sees a merge patch the same way).
	switched := newXR("switched", map[string]any{"providerConfigRef": ref("ClusterProviderConfig", granted)}, nil)
	g.Expect(tc.Create(ctx, switched)).To(Succeed())
	g.Expect(tc.Create(ctx, capiCluster(ns, "switched"))).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(provisioned(getXR(g, switched))).To(BeTrue()) }, timeout, interval).Should(Succeed())

	// Every new XR is held at admission until the bridge checked it; the
	// tenant cannot lift the hold, by patch or by update.
	for _, xr := range []*unstructured.Unstructured{ambient, external} {
		g.Eventually(func(g Gomega) { held(g, xr, infrav1.ProviderConfigNotGrantedReason) }, timeout, interval).Should(Succeed())
		err := tc.Patch(ctx, xr, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"crossplane.io/paused":null}}}`)))
		g.Expect(err).To(MatchError(ContainSubstring("only CAPXP lifts the hold")), "%s: removing the pause", xr.GetName())
		err = tc.Patch(ctx, xr, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"crossplane.io/paused":"false"}}}`)))
		g.Expect(err).To(MatchError(ContainSubstring("only CAPXP lifts the hold")), "%s: setting the pause to false", xr.GetName())
		got := getXR(g, xr)
		a := got.GetAnnotations()
		delete(a, infrav1.CrossplanePausedAnnotation)
		got.SetAnnotations(a)
		g.Expect(tc.Update(ctx, got)).To(MatchError(ContainSubstring("only CAPXP lifts the hold")), "%s: an update without the pause", xr.GetName())
	}
	g.Expect(warnings(g, ns, "ambient")).To(ContainElement(ContainSubstring(
		"a ClusterProviderConfigGrant with credentialSource " + credsGroup + "/InjectedIdentity covering namespace " + ns + " is missing")))

	// Credentials changed after admission: held at admission again, so
	// Crossplane never composes with the new ones.
	// The bridge writes the XR too: a conflict is answered as a user
	// would, by reading it again.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := getXR(g, switched)
		g.Expect(unstructured.SetNestedField(got.Object, ref("ClusterProviderConfig", ungranted), "spec", "providerConfigRef")).To(Succeed())
		return tc.Update(ctx, got)
	})
	if err == nil {
		g.Eventually(func(g Gomega) { held(g, switched, "") }, timeout, interval).Should(Succeed())
	} else {
		g.Expect(err).To(MatchError(ContainSubstring("a ClusterProviderConfigGrant with providerConfigRef")))
	}

	// A resource reference to what the XR does not own (a shared config,
	// cluster-scoped; a Secret; a Stub of another XR) is data: nothing is labelled,
	// paused or deleted on its account, and the XR's kind keeps working.
	intruder := newXR("intruder", map[string]any{"providerConfigRef": ref("ClusterProviderConfig", granted)}, nil)
	g.Expect(tc.Create(ctx, intruder)).To(Succeed())
	g.Expect(tc.Create(ctx, capiCluster(ns, "intruder"))).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(provisioned(getXR(g, intruder))).To(BeTrue()) }, timeout, interval).Should(Succeed())
	victim := composedOf(g, getXR(g, switched))
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"crossplane": map[string]any{"resourceRefs": []any{
		map[string]any{"apiVersion": credsGroup + "/v1beta1", "kind": "ClusterProviderConfig", "name": granted},
		map[string]any{"apiVersion": "v1", "kind": "Secret", "name": granted + "-creds"},
		map[string]any{"apiVersion": victim.GetAPIVersion(), "kind": victim.GetKind(), "name": victim.GetName()},
	}}}})
	g.Expect(err).NotTo(HaveOccurred())
	// Crossplane writes resourceRefs as it composes; a tenant may write
	// them too, and then delete the XR.
	g.Expect(tc.Patch(ctx, intruder, client.RawPatch(types.MergePatchType, raw))).To(Succeed())
	g.Expect(tc.Delete(ctx, capiCluster(ns, "intruder"))).To(Succeed())

	// A grant revoked mid-flight: the XR is held, and what it composed is
	// paused within 5 s.
	regranted := newXR("revoked", map[string]any{"providerConfigRef": ref("ClusterProviderConfig", granted)}, nil)
	g.Expect(tc.Create(ctx, regranted)).To(Succeed())
	g.Expect(tc.Create(ctx, capiCluster(ns, "revoked"))).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(provisioned(getXR(g, regranted))).To(BeTrue()) }, timeout, interval).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, grant)).To(Succeed())
	revokedAt := time.Now()
	g.Eventually(func(g Gomega) {
		s := composedOf(g, getXR(g, regranted))
		g.Expect(s.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
		g.Expect(s.GetAnnotations()).To(HaveKeyWithValue(infrav1.CredentialsHoldAnnotation, "true"))
	}, 5*time.Second, interval).Should(Succeed(), "the composed resources of an XR whose grant was revoked are paused within 5 s")
	t.Logf("composed resources paused %s after the grant was revoked", time.Since(revokedAt).Round(time.Millisecond))
	// Granted again: they resume.
	grantTo(t, "regranted"+suffix, granted, infrav1.AllowedNamespaces{Names: []string{ns}})
	g.Eventually(func(g Gomega) {
		s := composedOf(g, getXR(g, regranted))
		g.Expect(s.GetAnnotations()).NotTo(HaveKey(infrav1.CrossplanePausedAnnotation))
		g.Expect(getXR(g, regranted).GetAnnotations()).NotTo(HaveKey(infrav1.CrossplanePausedAnnotation))
	}, timeout, interval).Should(Succeed())

	// The victim and the grant are untouched by the intruder's references.
	g.Consistently(func(g Gomega) {
		v := composedOf(g, getXR(g, switched))
		g.Expect(v.GetDeletionTimestamp()).To(BeNil(), "another XR's Stub is not deleted")
	}, 2*time.Second, interval).Should(Succeed())
	gcrd := &metav1.PartialObjectMetadata{}
	gcrd.SetGroupVersionKind(extCRDGVK)
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "clusterproviderconfigs." + credsGroup}, gcrd)).To(Succeed())
	g.Expect(gcrd.GetLabels()).NotTo(HaveKey(infrav1.ClusterctlLabel), "a tenant's reference has the bridge label no CRD")

	// Over the whole story, no Stub in the namespace ever named the
	// ungranted config: nothing composed with it.
	g.Consistently(func(g Gomega) {
		for _, s := range stubs(g, ns) {
			r, _, _ := unstructured.NestedStringMap(s.Object, "spec", "providerConfigRef")
			g.Expect(r["name"]).NotTo(Equal(ungranted), "Stub %s names the ungranted config", s.GetName())
			g.Expect(r["name"]).NotTo(Equal("ambient"), "Stub %s acts with the ungranted ambient identity", s.GetName())
		}
	}, 2*time.Second, interval).Should(Succeed())
}

// warnings are the messages of the Warning events on an object of ns.
func warnings(g Gomega, ns, name string) []string {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("events.k8s.io/v1")
	l.SetKind("EventList")
	g.Expect(env.Client.List(ctx, l, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range l.Items {
		regarding, _, _ := unstructured.NestedString(e.Object, "regarding", "name")
		typ, _, _ := unstructured.NestedString(e.Object, "type")
		note, _, _ := unstructured.NestedString(e.Object, "note")
		reason, _, _ := unstructured.NestedString(e.Object, "reason")
		if regarding == name && typ == "Warning" {
			out = append(out, strings.TrimSpace(reason+": "+note))
		}
	}
	return out
}

var extCRDGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
