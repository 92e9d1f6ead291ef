package integration

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// A tenant floods its namespace with ProviderConfigs: hundreds naming
// missing Secrets, hundreds refused with long names. Its record stays
// writable and current: a new config of its own is judged in turn within
// seconds, and a grant's revocation is written at once.
func TestAFloodedNamespaceIsStillJudgedAndRevoked(t *testing.T) {
	g := NewWithT(t)
	ns, _, granted, _, grant := grantedTenant(t)
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

// One tenant's worst input delays another namespace's grants and
// revocations by a bounded amount, measured side by side in one run: the
// other namespace's new grant listed, and a revocation paused, with the
// first namespace quiet and then while it floods its namespace with 800
// ProviderConfigs, keeps four of its own configs cycling through judged,
// listed and deleted (each deletion a revocation scanning its 300 managed
// resources), and rewrites a config's spec as fast as the API server takes
// it. The bridge's heap (the test process's) is reported beside it.
func TestATenantsWorstInputDelaysAnotherNamespaceBoundedly(t *testing.T) {
	enforcingStack(t)
	g := NewWithT(t)
	victim, suffix, shared, hostiles := tenantBesideSharedCredentials(t)
	hostile := tenant(t, nil)
	grantTo(t, "hostile"+suffix, hostiles, infrav1.AllowedNamespaces{Names: []string{hostile}})
	hc := tenantClient(t, hostile)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}

	// measure grants the victim the shared config, runs a managed resource
	// on it and revokes the grant.
	measure := func(round string) (granted, revoked time.Duration) {
		start := time.Now()
		grant := grantTo(t, round+suffix, shared, infrav1.AllowedNamespaces{Names: []string{victim}})
		listed := func(g Gomega) bool {
			rec := &infrav1.NamespaceCredentials{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: victim, Name: infrav1.NamespaceCredentialsName}, rec)).To(Succeed())
			return slices.Contains(rec.Spec.Configs, infrav1.UsableConfig{APIGroup: credsGroup, Kind: infrav1.ProviderConfigKindCluster, Name: shared})
		}
		g.Eventually(listed, 10*time.Second, 10*time.Millisecond).Should(BeTrue(), "%s: the grant is listed", round)
		granted = time.Since(start)
		stub := stubOn(victim, round, "ClusterProviderConfig", shared)
		g.Eventually(func() error { return env.Client.Create(ctx, stub) }, timeout, interval).Should(Succeed())
		start = time.Now()
		g.Expect(env.Client.Delete(ctx, grant)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(listed(g)).To(BeFalse())
			got := stub.DeepCopy()
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stub), got)).To(Succeed())
			g.Expect(got.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
		}, 10*time.Second, 10*time.Millisecond).Should(Succeed(), "%s: the revocation pauses what ran on the grant", round)
		return granted, time.Since(start)
	}
	// rounds measures three times; the slowest of each.
	rounds := func(name string) (granted, revoked time.Duration) {
		for i := range 3 {
			gr, rv := measure(fmt.Sprintf("%s-%d", name, i))
			granted, revoked = max(granted, gr), max(revoked, rv)
			time.Sleep(time.Second)
		}
		return granted, revoked
	}
	// The victim's record settled (written, no revocation pending).
	g.Eventually(func(g Gomega) {
		rec := &infrav1.NamespaceCredentials{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: victim, Name: infrav1.NamespaceCredentialsName}, rec)).To(Succeed())
		g.Expect(rec.Annotations).NotTo(HaveKey("capxp.dev/revocation-pending"))
	}, timeout, interval).Should(Succeed())
	quietGrant, quietRevoke := rounds("quiet")
	quietHeap := heap()

	// The hostile namespace's managed resources (what its XRs compose),
	// scanned by each of its revocations, and its flood.
	g.Eventually(func() error {
		return env.Client.Create(ctx, stubOn(hostile, "composed-000", "ClusterProviderConfig", hostiles))
	}, timeout, interval).Should(Succeed())
	for i := 1; i < 300; i++ {
		g.Expect(env.Client.Create(ctx, stubOn(hostile, fmt.Sprintf("composed-%03d", i), "ClusterProviderConfig", hostiles))).To(Succeed())
	}
	long := strings.Repeat("x", 230)
	config := func(c client.Client, name string, spec map[string]any) error {
		return c.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": credsGroup + "/v1beta1", "kind": "ProviderConfig",
			"metadata": map[string]any{"name": name, "namespace": hostile}, "spec": spec,
		}})
	}
	for i := range 400 {
		g.Expect(config(hc, fmt.Sprintf("missing-%03d-%s", i, long), map[string]any{"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"name": fmt.Sprintf("missing-%03d", i), "key": "k"}}})).To(Succeed())
		g.Expect(config(hc, fmt.Sprintf("ambient-%03d-%s", i, long), map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}})).To(Succeed())
	}
	attack, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var cycles, rewrites atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			for i := 0; attack.Err() == nil; i++ {
				name := fmt.Sprintf("cycle-%d-%d", w, i)
				if hc.Create(attack, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hostile, Name: name}, Data: map[string][]byte{"kubeconfig": []byte(ownKubeconfig)}}) != nil ||
					config(hc, name, map[string]any{"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"name": name, "key": "kubeconfig"}}}) != nil {
					continue
				}
				// Listed (locked, judged again) after about 2 s: then deleted.
				select {
				case <-attack.Done():
				case <-time.After(2500 * time.Millisecond):
				}
				pc := pcObject()
				pc.SetNamespace(hostile)
				pc.SetName(name)
				if hc.Delete(ctx, pc) == nil {
					cycles.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		if config(hc, "rewritten", map[string]any{"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"name": "v", "key": "k"}}}) != nil {
			return
		}
		for i := 0; attack.Err() == nil; i++ {
			pc := pcObject()
			if hc.Get(attack, client.ObjectKey{Namespace: hostile, Name: "rewritten"}, pc) != nil {
				continue
			}
			_ = unstructured.SetNestedField(pc.Object, fmt.Sprintf("v%d", i), "spec", "credentials", "secretRef", "name")
			if hc.Update(attack, pc) == nil {
				rewrites.Add(1)
			}
		}
	})
	time.Sleep(5 * time.Second)
	attackedGrant, attackedRevoke := rounds("attacked")
	attackedHeap := heap()
	stop()
	wg.Wait()

	t.Logf("the slowest of three: the other namespace's grant listed in %s quiet, %s attacked (%.1fx); its revocation paused what ran on it in %s quiet, %s attacked (%.1fx); "+
		"the attack: 800 configs, %d listed-then-deleted cycles, %d spec rewrites; test process heap %d MiB quiet, %d MiB attacked",
		quietGrant.Round(time.Millisecond), attackedGrant.Round(time.Millisecond), float64(attackedGrant)/float64(quietGrant),
		quietRevoke.Round(time.Millisecond), attackedRevoke.Round(time.Millisecond), float64(attackedRevoke)/float64(quietRevoke),
		cycles.Load(), rewrites.Load(), quietHeap>>20, attackedHeap>>20)
	g.Expect(attackedGrant).To(BeNumerically("<", 5*time.Second), "the bound on a grant's delay")
	g.Expect(attackedRevoke).To(BeNumerically("<", 5*time.Second), "the bound on a revocation's delay")
}

// stubOn is a managed resource of the test provider in ns naming a config.
func stubOn(ns, name, kind, config string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": envtest.StubGVK.GroupVersion().String(), "kind": envtest.StubGVK.Kind,
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"providerConfigRef": map[string]any{"apiGroup": credsGroup, "kind": kind, "name": config}},
	}}
}
