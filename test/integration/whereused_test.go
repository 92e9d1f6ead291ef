package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/policies"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// The test provider, enforced as a platform enforces its providers: its
// Stubs are the managed resources, its Secrets kubeconfigs.
var testProvider = credentials.Provider{ConfigGroup: credsGroup, ManagedGroup: envtest.StubGVK.Group, Secret: credentials.SecretKubeconfig}

const (
	ownKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: the-tenants-own}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
)

// Credentials are enforced where they are used: a hostile tenant, with
// exactly the documented permissions, gets past the XR's check (it names
// nothing, or its own config) and has the composition name credentials its
// namespace neither owns nor was granted: the composition's default
// ProviderConfig "default" it made ambient, a Composition of its choice that
// hard-codes a shared ClusterProviderConfig, and its own ProviderConfig whose
// Secret runs an exec plugin as the provider. The API server refuses each
// managed resource; Crossplane reports the refusal on the XR; no Stub is
// stored naming the credentials. Its own static kubeconfig and a granted
// ClusterProviderConfig compose.
func TestManagedResourcesAreAdmittedOnlyWithUsableCredentials(t *testing.T) {
	g := NewWithT(t)
	ns, suffix, granted, ungranted, _ := grantedTenant(t)
	tc := tenantClient(t, ns)

	// The platform's Compositions a tenant may pick: one defaulting to the
	// namespace's ProviderConfig "default", as every shipped one does; one
	// another team's, hard-coding a ClusterProviderConfig.
	stub := func(ref map[string]any) map[string]any {
		return map[string]any{
			"name":    "stub",
			"base":    map[string]any{"apiVersion": envtest.StubGVK.GroupVersion().String(), "kind": envtest.StubGVK.Kind, "spec": map[string]any{"providerConfigRef": ref}},
			"patches": []any{map[string]any{"type": "FromCompositeFieldPath", "fromFieldPath": "metadata.annotations[" + envtest.ObserveAnnotation + "]", "toFieldPath": "spec.observe"}},
		}
	}
	for name, ref := range map[string]map[string]any{
		"defaults-to-own" + suffix:  {"apiGroup": credsGroup, "kind": "ProviderConfig", "name": "default"},
		"another-teams" + suffix:    {"apiGroup": credsGroup, "kind": "ClusterProviderConfig", "name": ungranted},
		"granted-platform" + suffix: {"apiGroup": credsGroup, "kind": "ClusterProviderConfig", "name": granted},
	} {
		comp, err := envtest.PatchAndTransform(name, clusterGVK, stub(ref))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(env.Client.Create(ctx, comp)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(ctx, comp) })
	}

	// The tenant's own configs: "default" acting with the provider's
	// identity, one on an exec plugin, one on its own kubeconfig.
	ownConfig := func(name string, spec map[string]any) {
		g.Expect(tc.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": credsGroup + "/v1beta1", "kind": "ProviderConfig",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
		}})).To(Succeed())
	}
	secretConfig := func(name, kubeconfig string) {
		g.Expect(tc.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"kubeconfig": []byte(kubeconfig)}})).To(Succeed())
		ownConfig(name, map[string]any{"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"name": name, "key": "kubeconfig"}}})
	}
	ownConfig("default", map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}})
	secretConfig("exec", envtest.ExecPluginKubeconfig)
	secretConfig("mine", ownKubeconfig)

	// The record says what the namespace may use, and why not the rest.
	g.Eventually(func(g Gomega) {
		rec := &infrav1.NamespaceCredentials{}
		g.Expect(tc.Get(ctx, client.ObjectKey{Namespace: ns, Name: infrav1.NamespaceCredentialsName}, rec)).To(Succeed(), "a tenant may read its record")
		g.Expect(rec.Spec.Configs).To(ConsistOf(
			infrav1.UsableConfig{APIGroup: credsGroup, Kind: infrav1.ProviderConfigKindCluster, Name: granted},
			infrav1.UsableConfig{APIGroup: credsGroup, Kind: infrav1.ProviderConfigKindNamespaced, Name: "mine"},
		))
		reasons := map[string]string{}
		for _, r := range rec.Spec.Refused {
			reasons[r.Name] = r.Reason
		}
		g.Expect(reasons).To(Equal(map[string]string{"default": infrav1.ProviderConfigNotGrantedReason, "exec": infrav1.SharedIdentityInSecretReason}))
	}, timeout, interval).Should(Succeed())
	g.Expect(tc.Update(ctx, &infrav1.NamespaceCredentials{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: infrav1.NamespaceCredentialsName}})).
		To(MatchError(ContainSubstring("forbidden")), "a tenant may not write its record")

	// The API server loads the policy asynchronously: wait until it refuses
	// a managed resource naming the ungranted ClusterProviderConfig.
	probe := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": envtest.StubGVK.GroupVersion().String(), "kind": envtest.StubGVK.Kind,
			"metadata": map[string]any{"namespace": ns, "name": "probe"},
			"spec":     map[string]any{"providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": name}},
		}}
	}
	g.Eventually(func() error { return env.Client.Create(ctx, probe(ungranted), client.DryRunAll) }, timeout, interval).
		Should(MatchError(ContainSubstring("a ClusterProviderConfigGrant with providerConfigRef " + credsGroup + "/" + ungranted + " covering namespace " + ns + " is missing")))
	// A provider's group is refused by capxp-credentials-unknown-families
	// until the credentials policy has covered it for a moment.
	g.Eventually(func() error { return env.Client.Create(ctx, probe(granted), client.DryRunAll) }, timeout, interval).Should(Succeed())

	newXR := func(name string, spec map[string]any) *unstructured.Unstructured {
		xr := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		xr.SetGroupVersionKind(clusterGVK)
		xr.SetNamespace(ns)
		xr.SetName(name)
		xr.SetAnnotations(map[string]string{envtest.ObserveAnnotation: script(goodStatus)})
		g.Eventually(func() error { return tc.Create(ctx, xr) }, timeout, interval).Should(Succeed())
		return xr
	}
	composition := func(name string) map[string]any {
		return map[string]any{"crossplane": map[string]any{"compositionRef": map[string]any{"name": name}}}
	}
	withRef := func(spec map[string]any, kind, name string) map[string]any {
		spec["providerConfigRef"] = map[string]any{"apiGroup": credsGroup, "kind": kind, "name": name}
		return spec
	}
	refused := map[*unstructured.Unstructured]string{
		// No reference at all: the composition's default is the
		// namespace's "default", which the tenant made ambient.
		newXR("unset", composition("defaults-to-own"+suffix)): "ProviderConfig " + credsGroup + "/default: ProviderConfig " + credsGroup + "/default uses spec.credentials.source InjectedIdentity",
		// Its own config declared, another team's Composition picked.
		newXR("chosen", withRef(composition("another-teams"+suffix), "ProviderConfig", "mine")): "ClusterProviderConfig " + credsGroup + "/" + ungranted + ": no ClusterProviderConfigGrant allows it",
		// Its own config, on a Secret that runs a command as the provider.
		newXR("exec", withRef(map[string]any{}, "ProviderConfig", "exec")): `user "u": exec`,
	}
	allowed := []*unstructured.Unstructured{
		newXR("mine", withRef(map[string]any{}, "ProviderConfig", "mine")),
		newXR("platform", composition("granted-platform"+suffix)),
		newXR("flip", withRef(map[string]any{}, "ClusterProviderConfig", granted)),
	}

	for xr, why := range refused {
		g.Eventually(func(g Gomega) {
			synced := xrCondition(getXR(g, xr), "Synced")
			g.Expect(synced).To(HaveKeyWithValue("status", "False"), "%s: Crossplane reports the refusal", xr.GetName())
			g.Expect(synced["message"]).To(And(ContainSubstring(policies.CredentialsPolicyName), ContainSubstring("spec.providerConfigRef: namespace "+ns+" may not use "), ContainSubstring(why)),
				"%s: the refusal names the field and why", xr.GetName())
		}, timeout, interval).Should(Succeed())
	}
	for _, xr := range allowed {
		g.Eventually(func(g Gomega) {
			got := getXR(g, xr)
			g.Expect(xrCondition(got, "Ready")).To(HaveKeyWithValue("status", "True"), "%s composes: Synced %v", xr.GetName(), xrCondition(got, "Synced"))
		}, timeout, interval).Should(Succeed())
	}

	// What was stored: a Stub for each allowed XR, none naming anything
	// else.
	stubs := &unstructured.UnstructuredList{}
	stubs.SetGroupVersionKind(envtest.StubGVK.GroupVersion().WithKind(envtest.StubGVK.Kind + "List"))
	g.Expect(env.Client.List(ctx, stubs, client.InNamespace(ns))).To(Succeed())
	var names []string
	for i := range stubs.Items {
		ref, _, _ := unstructured.NestedStringMap(stubs.Items[i].Object, "spec", "providerConfigRef")
		names = append(names, ref["kind"]+"/"+ref["name"])
	}
	g.Expect(names).To(ConsistOf("ProviderConfig/mine", "ClusterProviderConfig/"+granted, "ClusterProviderConfig/"+granted))

	// What the bridge judged cannot change under it: the Secret it read
	// (a kubeconfig decides whose identity the provider takes), the
	// config's spec, whether by update or by delete and create again.
	// What it refused may be fixed in place; metadata stays writable.
	for _, try := range []struct {
		what string
		obj  client.Object
		edit func(client.Object)
	}{
		{"the Secret's data", &corev1.Secret{}, func(o client.Object) { o.(*corev1.Secret).Data["kubeconfig"] = []byte(envtest.ExecPluginKubeconfig) }},
		{"the Secret's stringData", &corev1.Secret{}, func(o client.Object) {
			o.(*corev1.Secret).StringData = map[string]string{"kubeconfig": envtest.ExecPluginKubeconfig}
		}},
		{"the config's spec", pcObject(), func(o client.Object) {
			_ = unstructured.SetNestedField(o.(*unstructured.Unstructured).Object, "InjectedIdentity", "spec", "credentials", "source")
		}},
	} {
		g.Expect(tc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mine"}, try.obj)).To(Succeed())
		try.edit(try.obj)
		g.Expect(tc.Update(ctx, try.obj)).To(MatchError(And(ContainSubstring(policies.LockPolicyName), ContainSubstring("is locked"))), "a tenant may not change %s", try.what)
	}
	g.Expect(tc.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"}})).
		To(MatchError(And(ContainSubstring(policies.LockPolicyName), ContainSubstring("is locked"))), "a tenant may not delete the Secret its usable config was judged on")
	mine := pcObject()
	g.Expect(tc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mine"}, mine)).To(Succeed())
	mine.SetLabels(map[string]string{"team": "a"})
	g.Expect(tc.Update(ctx, mine)).To(Succeed(), "a locked config's metadata stays the tenant's")
	execSecret := &corev1.Secret{}
	g.Expect(tc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "exec"}, execSecret)).To(Succeed())
	execSecret.Data["kubeconfig"] = []byte(envtest.ExecPluginKubeconfig + "\n")
	g.Expect(tc.Update(ctx, execSecret)).To(Succeed(), "a refused config's Secret is not locked")
	g.Expect(tc.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine-next"}, Data: map[string][]byte{"kubeconfig": []byte(ownKubeconfig)}})).
		To(Succeed(), "credentials are rotated under a new name")

	// Only the bridge marks its holds: a marker set by the tenant would
	// have it lift a pause it never set.
	platform := allowed[1]
	g.Expect(tc.Patch(ctx, platform, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+infrav1.CredentialsHoldAnnotation+`":"true"}}}`)))).
		To(MatchError(ContainSubstring("only CAPXP marks the holds it lifts")))

	// Revocation reaches what runs on the revoked grant whatever its XR's
	// state: the platform XR paused and deleting, its Stub kept by a
	// finalizer, is paused within 5 s of the grant's deletion.
	stubOf := func(g Gomega, xr string) *unstructured.Unstructured {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(stubs.GroupVersionKind())
		g.Expect(env.Client.List(ctx, l, client.InNamespace(ns), client.MatchingLabels{"crossplane.io/composite": xr})).To(Succeed())
		g.Expect(l.Items).To(HaveLen(1), "the Stub of XR %s", xr)
		return &l.Items[0]
	}
	platformStub := func(g Gomega) *unstructured.Unstructured { return stubOf(g, "platform") }
	g.Expect(env.Client.Patch(ctx, platform, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"crossplane.io/paused":"true"}}}`)))).To(Succeed())
	g.Expect(env.Client.Patch(ctx, platformStub(g), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["test.capxp.dev/keep"]}}`)))).To(Succeed())
	t.Cleanup(func() {
		_ = env.Client.Patch(ctx, platformStub(NewWithT(t)), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	g.Expect(env.Client.Delete(ctx, platform)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getXR(g, platform).GetDeletionTimestamp()).NotTo(BeNil())
	}, timeout, interval).Should(Succeed())
	g.Expect(platformStub(g).GetAnnotations()).NotTo(HaveKey("crossplane.io/paused"))

	revoked := time.Now()
	g.Expect(env.Client.Delete(ctx, &infrav1.ClusterProviderConfigGrant{ObjectMeta: metav1.ObjectMeta{Name: "granted" + suffix}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		stub := platformStub(g)
		g.Expect(stub.GetAnnotations()).To(HaveKeyWithValue("crossplane.io/paused", "true"))
		g.Expect(stub.GetLabels()).To(HaveKeyWithValue(infrav1.CredentialsRevokedLabel, infrav1.CredentialsRevokedPaused))
	}, 5*time.Second, 50*time.Millisecond).Should(Succeed(), "the Stub on the revoked grant is paused within 5 s")
	t.Logf("revocation paused the managed resource %v after the grant's deletion", time.Since(revoked).Round(time.Millisecond))

	// A resource paused for revoked credentials runs again once what it
	// names is usable: the tenant points its XR at its own config.
	g.Eventually(func(g Gomega) {
		g.Expect(stubOf(g, "flip").GetLabels()).To(HaveKeyWithValue(infrav1.CredentialsRevokedLabel, infrav1.CredentialsRevokedPaused))
	}, 5*time.Second, 50*time.Millisecond).Should(Succeed())
	// After the revocation has settled (the record no longer pending), so
	// that only the change of the resource itself can resume it.
	g.Eventually(func(g Gomega) {
		rec := &infrav1.NamespaceCredentials{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: infrav1.NamespaceCredentialsName}, rec)).To(Succeed())
		g.Expect(rec.GetAnnotations()).NotTo(HaveKey("capxp.dev/revocation-pending"))
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() error {
		return tc.Patch(ctx, allowed[2], client.RawPatch(types.MergePatchType, []byte(`{"spec":{"providerConfigRef":{"kind":"ProviderConfig","name":"mine"}}}`)))
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		flip := stubOf(g, "flip")
		name, _, _ := unstructured.NestedString(flip.Object, "spec", "providerConfigRef", "name")
		g.Expect(name).To(Equal("mine"))
		g.Expect(flip.GetAnnotations()).NotTo(HaveKey("crossplane.io/paused"))
		g.Expect(flip.GetLabels()).NotTo(HaveKey(infrav1.CredentialsRevokedLabel))
	}, timeout, interval).Should(Succeed(), "the Stub now on the namespace's own config is resumed")

	// Once the grant goes, a new managed resource on it is refused too.
	g.Eventually(func(g Gomega) {
		rec := &infrav1.NamespaceCredentials{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: infrav1.NamespaceCredentialsName}, rec)).To(Succeed())
		g.Expect(rec.Spec.Configs).To(ConsistOf(infrav1.UsableConfig{APIGroup: credsGroup, Kind: infrav1.ProviderConfigKindNamespaced, Name: "mine"}))
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() error { return env.Client.Create(ctx, probe(granted), client.DryRunAll) }, timeout, interval).
		Should(MatchError(ContainSubstring("a ClusterProviderConfigGrant with providerConfigRef " + credsGroup + "/" + granted + " covering namespace " + ns + " is missing")))

	// Granted again, what the bridge paused resumes.
	grantTo(t, "granted-again"+suffix, granted, infrav1.AllowedNamespaces{Names: []string{ns}})
	g.Eventually(func(g Gomega) {
		stub := platformStub(g)
		g.Expect(stub.GetAnnotations()).NotTo(HaveKey("crossplane.io/paused"))
		g.Expect(stub.GetLabels()).NotTo(HaveKey(infrav1.CredentialsRevokedLabel))
	}, timeout, interval).Should(Succeed())
}

// removeCredentialsPolicies deletes, once the test ends, the credentials
// policies a bridge enforcing other providers wrote: other tests run bridges
// that do not enforce them.
func removeCredentialsPolicies(t *testing.T) {
	t.Cleanup(func() {
		for _, n := range []string{policies.CredentialsPolicyName, policies.LockPolicyName, policies.NetworkPolicyName, policies.UnknownFamiliesPolicyName} {
			_ = env.Client.Delete(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: n}})
			_ = env.Client.Delete(ctx, &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
	})
}

// pcObject is an empty ProviderConfig of the test provider.
func pcObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(credsGroup + "/v1beta1")
	u.SetKind("ProviderConfig")
	return u
}
