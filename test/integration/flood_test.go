package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/controllers"
)

// A tenant floods its namespace with ProviderConfigs: hundreds naming
// missing Secrets, hundreds refused with long names. Its record stays
// writable and current: a new config of its own is judged in turn within
// seconds, and a grant's revocation is written at once.
func TestAFloodedNamespaceIsStillJudgedAndRevoked(t *testing.T) {
	stackWith(t, controllers.Options{CredentialsProviders: []credentials.Provider{testProvider}})
	removeCredentialsPolicies(t)
	g := NewWithT(t)
	ns, suffix, granted, _ := tenantBesideSharedCredentials(t)
	grant := grantTo(t, "granted"+suffix, granted, infrav1.AllowedNamespaces{Names: []string{ns}})
	tc := tenantClient(t, ns)
	record := func(g Gomega) *infrav1.NamespaceCredentials {
		rec := &infrav1.NamespaceCredentials{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: infrav1.NamespaceCredentialsName}, rec)).To(Succeed())
		return rec
	}
	lists := func(rec *infrav1.NamespaceCredentials, kind infrav1.ProviderConfigKind, name string) bool {
		for _, c := range rec.Spec.Configs {
			if c.Kind == kind && c.Name == name {
				return true
			}
		}
		return false
	}
	g.Eventually(func(g Gomega) {
		g.Expect(lists(record(g), infrav1.ProviderConfigKindCluster, granted)).To(BeTrue())
	}, timeout, interval).Should(Succeed())

	// The flood: more configs than a record lists, with the longest names,
	// half naming missing Secrets, half refused for their source.
	long := strings.Repeat("x", 230)
	config := func(name string, spec map[string]any) {
		g.Expect(tc.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": credsGroup + "/v1beta1", "kind": "ProviderConfig",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
		}})).To(Succeed())
	}
	start := time.Now()
	for i := range 400 {
		config(fmt.Sprintf("missing-%03d-%s", i, long), map[string]any{"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"name": fmt.Sprintf("missing-%03d", i), "key": "k"}}})
		config(fmt.Sprintf("ambient-%03d-%s", i, long), map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}})
	}
	t.Logf("800 ProviderConfigs created in %s", time.Since(start).Round(time.Millisecond))

	// A new config of its own is judged first, within seconds (without the
	// flood: a few hundred milliseconds).
	start = time.Now()
	g.Expect(tc.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"}, Data: map[string][]byte{"kubeconfig": []byte(ownKubeconfig)}})).To(Succeed())
	config("mine", map[string]any{"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"name": "mine", "key": "kubeconfig"}}})
	g.Eventually(func(g Gomega) {
		rec := record(g)
		var why []string
		for _, r := range rec.Spec.Refused {
			if r.Name == "mine" {
				why = append(why, r.Reason+": "+r.Message)
			}
		}
		g.Expect(lists(rec, infrav1.ProviderConfigKindNamespaced, "mine")).To(BeTrue(), "refused: %v; %d listed, %d refused", why, len(rec.Spec.Configs), len(rec.Spec.Refused))
	}, 10*time.Second, interval).Should(Succeed())
	t.Logf("a new config listed %s after it was created, beside the flood", time.Since(start).Round(time.Millisecond))

	// The grant's revocation is written at once.
	start = time.Now()
	g.Expect(env.Client.Delete(ctx, grant)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(lists(record(g), infrav1.ProviderConfigKindCluster, granted)).To(BeFalse())
	}, 5*time.Second, interval).Should(Succeed())
	t.Logf("the revoked grant left the record in %s", time.Since(start).Round(time.Millisecond))

	rec := record(g)
	g.Expect(len(rec.Spec.Refused)).To(BeNumerically("<=", credentials.MaxRefused))
	reasons := map[string]int{}
	for _, r := range rec.Spec.Refused {
		reasons[r.Reason]++
	}
	t.Logf("the record: %d configs listed, %d refusals explained %v, %d locked", len(rec.Spec.Configs), len(rec.Spec.Refused), reasons, len(rec.Spec.Locked))
}
