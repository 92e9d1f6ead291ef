package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/controllers"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/policies"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// A tenant cannot switch enforcement off by giving it something it cannot
// read: its own ProviderConfig naming a Secret by a name the API server
// cannot look up, and the platform's grant of another config whose selector
// cannot be read, are each refused and reported; the namespace's record
// still changes, and a grant revoked afterwards stops what ran on it.
func TestAnUnreadableConfigIsAVerdictOnItAlone(t *testing.T) {
	g := NewWithT(t)
	ns, suffix, granted, ungranted, grant := grantedTenant(t)
	// The grant's schema checks the selector's operators, not its labels.
	broken := grantTo(t, "broken"+suffix, ungranted, infrav1.AllowedNamespaces{Selector: &metav1.LabelSelector{
		MatchLabels: map[string]string{"team": "not a label value"}}})
	tc := tenantClient(t, ns)
	for name, secret := range map[string]string{"slash": "a/b", "dotdot": "..", "upper": "Creds"} {
		g.Expect(tc.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": credsGroup + "/v1beta1", "kind": "ProviderConfig",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"name": secret, "key": "k"}}},
		}})).To(Succeed(), name)
	}
	record := func(g Gomega) *infrav1.NamespaceCredentials {
		rec := &infrav1.NamespaceCredentials{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: infrav1.NamespaceCredentialsName}, rec)).To(Succeed())
		return rec
	}
	g.Eventually(func(g Gomega) {
		rec := record(g)
		g.Expect(rec.Spec.Configs).To(ContainElement(infrav1.UsableConfig{APIGroup: credsGroup, Kind: infrav1.ProviderConfigKindCluster, Name: granted}))
		reasons := map[string]string{}
		for _, r := range rec.Spec.Refused {
			reasons[r.Name] = r.Reason + ": " + r.Message
		}
		g.Expect(reasons).To(HaveKeyWithValue("slash", ContainSubstring(`"a/b" is not a valid Secret name`)))
		g.Expect(reasons).To(HaveKeyWithValue("dotdot", HavePrefix(infrav1.CredentialsSecretUnreadableReason)))
		g.Expect(reasons).To(HaveKeyWithValue("upper", HavePrefix(infrav1.CredentialsSecretUnreadableReason)))
		g.Expect(reasons).To(HaveKeyWithValue(ungranted, And(HavePrefix(infrav1.InvalidGrantReason), ContainSubstring(broken.Name))))
	}, timeout, interval).Should(Succeed())

	// Something runs on the granted config: a managed resource, created by
	// whoever composes it.
	stub := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": envtest.StubGVK.GroupVersion().String(), "kind": envtest.StubGVK.Kind,
		"metadata": map[string]any{"namespace": ns, "name": "running"},
		"spec":     map[string]any{"providerConfigRef": map[string]any{"apiGroup": credsGroup, "kind": "ClusterProviderConfig", "name": granted}},
	}}
	g.Eventually(func() error { return env.Client.Create(ctx, stub) }, timeout, interval).Should(Succeed())

	// The platform revokes the grant: the record stops listing it and what
	// ran on it is paused within seconds, the malformed configs still there.
	start := time.Now()
	g.Expect(env.Client.Delete(ctx, grant)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(record(g).Spec.Configs).NotTo(ContainElement(infrav1.UsableConfig{APIGroup: credsGroup, Kind: infrav1.ProviderConfigKindCluster, Name: granted}))
		got := stub.DeepCopy()
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stub), got)).To(Succeed())
		g.Expect(got.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
		g.Expect(got.GetLabels()).To(HaveKey(infrav1.CredentialsRevokedLabel))
	}, 5*time.Second, interval).Should(Succeed())
	t.Logf("beside three unreadable configs and an unreadable grant, the revocation paused what ran on it in %s", time.Since(start).Round(10*time.Millisecond))
	again := stub.DeepCopy()
	again.SetName("again")
	again.SetResourceVersion("")
	g.Eventually(func() error { return env.Client.Create(ctx, again, client.DryRunAll) }, 5*time.Second, interval).
		Should(MatchError(ContainSubstring(policies.CredentialsPolicyName)), "a new managed resource on the revoked config is refused")
}

// Cluster API reads <cluster>-kubeconfig Secrets with its own identity: the
// API server refuses, from anyone and whether the manager runs or not, one
// whose kubeconfig names a file of the reader, a command or an auth
// plugin, in YAML or JSON, plainly or escaped. A kubeconfig holding its
// credentials inline is admitted, as is any other Secret.
func TestClusterKubeconfigSecretsReachNothingBeyondThemselves(t *testing.T) {
	utf16 := func(s string) string {
		b := []byte{0xff, 0xfe}
		for _, c := range []byte(s) {
			b = append(b, c, 0)
		}
		return string(b)
	}
	bridge := stack(t)
	g := NewWithT(t)
	ns := namespace(t)
	tc := tenantClient(t, ns)
	kubeconfig := func(user string) string {
		return `{"apiVersion":"v1","kind":"Config","clusters":[{"name":"c","cluster":{"server":"https://10.0.0.1:6443","certificate-authority-data":"Zm9v"}}],` +
			`"users":[{"name":"u","user":` + user + `}],"contexts":[{"name":"x","context":{"cluster":"c","user":"u"}}],"current-context":"x"}`
	}
	secret := func(name, key, value string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: "cluster.x-k8s.io/secret", Data: map[string][]byte{key: []byte(value)}}
	}
	// The manager writes the policy; the API server loads it in a moment.
	g.Eventually(func() error {
		return tc.Create(ctx, secret("probe-kubeconfig", "value", kubeconfig(`{"tokenFile":"/dev/zero"}`)), client.DryRunAll)
	}, timeout, interval).Should(MatchError(ContainSubstring(policies.KubeconfigPolicyName)))
	g.Expect(bridge.Stop()).To(Succeed())

	refused := map[string]struct{ value, says string }{
		"token-file":    {kubeconfig(`{"tokenFile":"/var/run/secrets/kubernetes.io/serviceaccount/token"}`), "tokenFile"},
		"exec":          {kubeconfig(`{"exec":{"apiVersion":"client.authentication.k8s.io/v1","command":"sh"}}`), "exec"},
		"auth-provider": {kubeconfig(`{"auth-provider":{"name":"oidc"}}`), "auth-provider"},
		"key-file":      {kubeconfig(`{"client-certificate":"/etc/c","client-key":"/etc/k"}`), "client-certificate, client-key"},
		"escaped":       {kubeconfig(`{"token\u0046ile":"/dev/zero"}`), "a backslash escape"},
		"yaml":          {"users:\n- name: u\n  user:\n    'exec' :\n      command: sh\n", "exec"},
		"ca-file":       {"clusters: [{name: c, cluster: {certificate-authority: /etc/ca}}]\n", "certificate-authority"},
		// Found by an adversarial review: a YAML !!binary key decodes into
		// tokenFile; UTF-16 spells it with NULs between its bytes.
		"binary-tag": {"users: [{name: u, user: {!!binary dG9rZW5GaWxl: /dev/zero}}]\n", "a YAML tag"},
		"utf-16":     {utf16(kubeconfig(`{"tokenFile":"/dev/zero"}`)), "a NUL byte (UTF-16 or UTF-32)"},
	}
	for name, r := range refused {
		err := tc.Create(ctx, secret(name+"-kubeconfig", "value", r.value))
		g.Expect(err).To(MatchError(And(ContainSubstring(policies.KubeconfigPolicyName), ContainSubstring("holds "+r.says))), name)
	}
	inline := kubeconfig(`{"client-certificate-data":"Zm9v","client-key-data":"YmFy","token":"abc"}`)
	g.Expect(tc.Create(ctx, secret("inline-kubeconfig", "value", inline))).To(Succeed(), "a kubeconfig holding its credentials inline")
	g.Expect(tc.Create(ctx, secret("other-kubeconfig", "kubeconfig", kubeconfig(`{"tokenFile":"/dev/zero"}`)))).To(Succeed(), "a key CAPI does not read")
	g.Expect(tc.Create(ctx, secret("workload", "value", kubeconfig(`{"tokenFile":"/dev/zero"}`)))).To(Succeed(), "a Secret CAPI does not read")
	changed := secret("inline-kubeconfig", "value", kubeconfig(`{"tokenFile":"/dev/zero"}`))
	g.Expect(tc.Patch(ctx, changed, client.MergeFrom(secret("inline-kubeconfig", "value", inline)))).
		To(MatchError(ContainSubstring(policies.KubeconfigPolicyName)), "changed into one naming a file")
}

// A provider family installed while the manager is down is refused at
// admission: the credentials policy lists the groups the manager saw, and
// the unknown-families policy, which needs no manager, refuses the rest of
// an enforced provider's groups.
func TestAProviderFamilyInstalledWhileTheManagerIsDownIsRefused(t *testing.T) {
	bridge := enforcingStack(t)
	g := NewWithT(t)
	ns := namespace(t)
	// The policy as this bridge writes it, for the test provider's groups:
	// an earlier test's bridge may have left one for other providers.
	g.Eventually(func(g Gomega) {
		p := &admissionv1.ValidatingAdmissionPolicy{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Name: policies.UnknownFamiliesPolicyName}, p)).To(Succeed())
		g.Expect(p.Spec.MatchConditions).To(ContainElement(HaveField("Expression", ContainSubstring(`"`+testProvider.ManagedGroup+`"`))))
	}, timeout, interval).Should(Succeed())
	g.Expect(bridge.Stop()).To(Succeed())

	group := "later." + testProvider.ManagedGroup
	crd := &extv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "laters." + group},
		Spec: extv1.CustomResourceDefinitionSpec{
			Group: group, Scope: extv1.NamespaceScoped,
			Names: extv1.CustomResourceDefinitionNames{Plural: "laters", Singular: "later", Kind: "Later", ListKind: "LaterList"},
			Versions: []extv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &extv1.CustomResourceValidation{OpenAPIV3Schema: &extv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	g.Expect(env.Client.Create(ctx, crd)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, crd) })
	later := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Later",
		"metadata": map[string]any{"namespace": ns, "name": "on-anything"},
		"spec":     map[string]any{"providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": "never-granted"}},
	}}
	g.Eventually(func() error { return env.Client.Create(ctx, later, client.DryRunAll) }, timeout, interval).
		Should(MatchError(And(ContainSubstring(policies.UnknownFamiliesPolicyName), ContainSubstring("API group "+group))))
}

// A grant revoked while the manager is down: the API server still admits
// what the last record lists, since nothing else can tell it the grant
// went; once the manager starts, the record drops it and what ran on it is
// paused within seconds.
func TestAGrantRevokedDuringAnOutageTakesEffectOnStart(t *testing.T) {
	o := controllers.Options{CredentialsProviders: []credentials.Provider{testProvider}}
	bridge := stackWith(t, o)
	removeCredentialsPolicies(t)
	g := NewWithT(t)
	ns, suffix, granted, _ := tenantBesideSharedCredentials(t)
	grant := grantTo(t, "granted"+suffix, granted, infrav1.AllowedNamespaces{Names: []string{ns}})
	usable := infrav1.UsableConfig{APIGroup: credsGroup, Kind: infrav1.ProviderConfigKindCluster, Name: granted}
	listed := func(g Gomega) bool {
		rec := &infrav1.NamespaceCredentials{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: infrav1.NamespaceCredentialsName}, rec)).To(Succeed())
		for _, c := range rec.Spec.Configs {
			if c == usable {
				return true
			}
		}
		return false
	}
	g.Eventually(listed, timeout, interval).Should(BeTrue())
	stub := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": envtest.StubGVK.GroupVersion().String(), "kind": envtest.StubGVK.Kind,
		"metadata": map[string]any{"namespace": ns, "name": "running"},
		"spec":     map[string]any{"providerConfigRef": map[string]any{"apiGroup": credsGroup, "kind": "ClusterProviderConfig", "name": granted}},
	}}
	g.Eventually(func() error { return env.Client.Create(ctx, stub) }, timeout, interval).Should(Succeed())

	g.Expect(bridge.Stop()).To(Succeed())
	g.Expect(env.Client.Delete(ctx, grant)).To(Succeed())
	g.Consistently(listed, 2*time.Second, interval).Should(BeTrue(), "nothing but the manager writes the record")

	start := time.Now()
	restarted, err := env.StartBridgeAs(ctx, env.Config, o)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(restarted.Stop()).To(Succeed()) })
	g.Eventually(func(g Gomega) {
		g.Expect(listed(g)).To(BeFalse())
		got := stub.DeepCopy()
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stub), got)).To(Succeed())
		g.Expect(got.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
	}, timeout, interval).Should(Succeed())
	t.Logf("a grant revoked during the outage: dropped, and what ran on it paused, %s after the manager started", time.Since(start).Round(10*time.Millisecond))
}

// A namespace deleted while managed resources of an enforced provider are in
// it finishes: its NamespaceCredentials outlives them, so the provider's
// finalizer removal is admitted (without the record, every update of them
// is refused), and a change of their credentials is still judged meanwhile.
// The test deletes what the namespace controller would.
func TestADeletedNamespaceKeepsItsRecordUntilItsManagedResourcesAreGone(t *testing.T) {
	g := NewWithT(t)
	ns, _, granted, ungranted, _ := grantedTenant(t)
	// The tenant's own config, on a Secret the record locks.
	tc := tenantClient(t, ns)
	own := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own"}, Data: map[string][]byte{"kubeconfig": []byte(ownKubeconfig)}}
	g.Expect(tc.Create(ctx, own)).To(Succeed())
	g.Expect(tc.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": credsGroup + "/v1beta1", "kind": "ProviderConfig",
		"metadata": map[string]any{"name": "own", "namespace": ns},
		"spec":     map[string]any{"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"name": "own", "key": "kubeconfig"}}},
	}})).To(Succeed())
	key := client.ObjectKey{Namespace: ns, Name: infrav1.NamespaceCredentialsName}
	g.Eventually(func(g Gomega) {
		rec := &infrav1.NamespaceCredentials{}
		g.Expect(env.Client.Get(ctx, key, rec)).To(Succeed())
		g.Expect(rec.Finalizers).To(ContainElement(infrav1.NamespaceCredentialsFinalizer))
		g.Expect(rec.Spec.Configs).To(ContainElements(infrav1.UsableConfig{APIGroup: credsGroup, Kind: infrav1.ProviderConfigKindCluster, Name: granted},
			infrav1.UsableConfig{APIGroup: credsGroup, Kind: infrav1.ProviderConfigKindNamespaced, Name: "own"}))
		g.Expect(rec.Spec.Locked).To(ContainElement(infrav1.LockedObject{Kind: "Secret", Name: "own"}))
	}, timeout, interval).Should(Succeed())
	g.Expect(tc.Delete(ctx, own)).To(MatchError(ContainSubstring(policies.LockPolicyName)), "a locked Secret stays while its namespace does")
	stub := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": envtest.StubGVK.GroupVersion().String(), "kind": envtest.StubGVK.Kind,
		"metadata": map[string]any{"namespace": ns, "name": "running", "finalizers": []any{"provider.example.org/external"}},
		"spec":     map[string]any{"providerConfigRef": map[string]any{"apiGroup": credsGroup, "kind": "ClusterProviderConfig", "name": granted}},
	}}
	g.Eventually(func() error { return env.Client.Create(ctx, stub) }, timeout, interval).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(env.Client.Delete(ctx, &infrav1.NamespaceCredentials{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: infrav1.NamespaceCredentialsName}})).To(Succeed())
	g.Expect(env.Client.Delete(ctx, stub)).To(Succeed())
	// As the namespace controller empties it, with no power over locks
	// (here: the tenant's identity), the locked Secret goes too.
	g.Eventually(func() error { return client.IgnoreNotFound(tc.Delete(ctx, own)) }, timeout, interval).Should(Succeed())
	g.Consistently(func() error { return env.Client.Get(ctx, key, &infrav1.NamespaceCredentials{}) }, 2*time.Second, interval).
		Should(Succeed(), "the record outlives the managed resource")

	switched := stub.DeepCopy()
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stub), switched)).To(Succeed())
	g.Expect(unstructured.SetNestedField(switched.Object, ungranted, "spec", "providerConfigRef", "name")).To(Succeed())
	g.Expect(env.Client.Update(ctx, switched)).To(MatchError(ContainSubstring(policies.CredentialsPolicyName)),
		"a change of credentials is judged while the namespace is deleted")

	// The provider lets its managed resource go.
	g.Eventually(func() error {
		got := stub.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(stub), got); err != nil {
			return err
		}
		got.SetFinalizers(nil)
		return env.Client.Update(ctx, got)
	}, timeout, interval).Should(Succeed())
	start := time.Now()
	g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, key, &infrav1.NamespaceCredentials{})) }, timeout, interval).
		Should(BeTrue(), "the record goes once nothing needs it")
	t.Logf("the record went %s after the last managed resource", time.Since(start).Round(10*time.Millisecond))
}

// A provider family whose ProviderConfig kind the API server starts serving
// after the manager started (its package installed after `clusterctl
// init`): a namespace's own configs of it are judged and listed, without a
// restart and without any other change to the namespace.
func TestAProviderConfigKindServedAfterTheManagerStartedIsJudged(t *testing.T) {
	late := credentials.Provider{ConfigGroup: "late." + credsGroup, ManagedGroup: "late." + envtest.StubGVK.Group, Secret: testProvider.Secret}
	stackWith(t, controllers.Options{CredentialsProviders: []credentials.Provider{testProvider, late}})
	g := NewWithT(t)
	ns := namespace(t)
	record := func(g Gomega) *infrav1.NamespaceCredentials {
		rec := &infrav1.NamespaceCredentials{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: infrav1.NamespaceCredentialsName}, rec)).To(Succeed())
		return rec
	}
	// The namespace is judged, and settles, before the kind is served.
	g.Eventually(func(g Gomega) {
		before := record(g).ResourceVersion
		time.Sleep(5 * time.Second)
		g.Expect(record(g).ResourceVersion).To(Equal(before))
	}, timeout, interval).Should(Succeed())

	crd := &extv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "providerconfigs." + late.ConfigGroup},
		Spec: extv1.CustomResourceDefinitionSpec{
			Group: late.ConfigGroup, Scope: extv1.NamespaceScoped,
			Names: extv1.CustomResourceDefinitionNames{Plural: "providerconfigs", Singular: "providerconfig", Kind: "ProviderConfig", ListKind: "ProviderConfigList"},
			Versions: []extv1.CustomResourceDefinitionVersion{{Name: "v1beta1", Served: true, Storage: true,
				Schema: &extv1.CustomResourceValidation{OpenAPIV3Schema: &extv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	g.Expect(env.Client.Create(ctx, crd)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, crd) })
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late-creds"},
		Data:       map[string][]byte{"credentials": []byte(ownKubeconfig)},
	})).To(Succeed())
	pc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": late.ConfigGroup + "/v1beta1", "kind": "ProviderConfig",
		"metadata": map[string]any{"name": "late", "namespace": ns},
		"spec":     map[string]any{"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"name": "late-creds", "key": "credentials"}}},
	}}
	g.Eventually(func() error { return env.Client.Create(ctx, pc) }, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(record(g).Spec.Configs).To(ContainElement(infrav1.UsableConfig{APIGroup: late.ConfigGroup, Kind: infrav1.ProviderConfigKindNamespaced, Name: "late"}))
	}, timeout, interval).Should(Succeed())
}
