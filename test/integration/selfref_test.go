package integration

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/policies"
)

// One XR against everyone: a tenant's XR whose resource references name
// itself hundreds of times (thousands are refused at admission), and whose
// controller owner is itself, is held
// for its ungranted credentials like any other, the bridge's heap grows by
// at most a little, and another tenant's XR is still released in seconds.
func TestASelfReferencingXRIsBounded(t *testing.T) {
	stack(t)
	g := NewWithT(t)
	ns := tenant(t, nil)
	other, _, granted, _ := tenantBesideSharedCredentials(t)
	grantTo(t, granted, granted, infrav1.AllowedNamespaces{Names: []string{other}})
	tc, otc := tenantClient(t, ns), tenantClient(t, other)

	untilAdmissionHolds(g, tc, ns)
	// Its own config on the provider's ambient identity: held.
	ambientConfig(g, tc, ns)
	loop := xrNaming(ns, "loop", "ProviderConfig", "ambient")
	loop.SetAnnotations(map[string]string{infrav1.CrossplanePausedAnnotation: "true"})
	g.Eventually(func() error { return tc.Create(ctx, loop) }, timeout, interval).Should(Succeed())
	held := func(g Gomega) {
		got := getXR(g, loop)
		g.Expect(got.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
		g.Expect(got.GetAnnotations()).To(HaveKeyWithValue(infrav1.CredentialsHoldAnnotation, "true"))
	}
	g.Eventually(held, timeout, interval).Should(Succeed())

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	// Itself, as many times as the resource references may hold, as its
	// composed resources and its controller. More are refused at
	// admission, naming the bound.
	self := func(n int) []any {
		refs := make([]any, n)
		for i := range refs {
			refs[i] = map[string]any{"apiVersion": clusterGVK.GroupVersion().String(), "kind": clusterGVK.Kind, "name": "loop"}
		}
		return refs
	}
	update := func(refs []any) error {
		got := getXR(g, loop)
		g.Expect(unstructured.SetNestedSlice(got.Object, refs, "spec", "crossplane", "resourceRefs")).To(Succeed())
		got.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterGVK.GroupVersion().String(), Kind: clusterGVK.Kind, Name: "loop", UID: got.GetUID(), Controller: ptr.To(true)}})
		return tc.Update(ctx, got)
	}
	g.Eventually(func() error { return update(self(5000)) }, timeout, interval).Should(
		MatchError(ContainSubstring(fmt.Sprintf("spec.crossplane.resourceRefs: at most %d composed resources per composite resource, 5000 given", policies.MaxResourceRefs))))
	long := self(1)
	long[0].(map[string]any)["name"] = strings.Repeat("x", 4000)
	g.Eventually(func() error { return update(long) }, timeout, interval).Should(MatchError(ContainSubstring("spec.crossplane.resourceRefs: each reference names an object")))
	g.Eventually(func() error { return update(self(policies.MaxResourceRefs)) }, timeout, interval).Should(Succeed())
	// Nor may a selector hold more than a label selector does.
	g.Eventually(func() error {
		got := getXR(g, loop)
		g.Expect(unstructured.SetNestedStringMap(got.Object, map[string]string{"capxp.dev/backend": strings.Repeat("y", 100)},
			"spec", "crossplane", "compositionSelector", "matchLabels")).To(Succeed())
		return tc.Update(ctx, got)
	}, timeout, interval).Should(MatchError(ContainSubstring("a composition (revision) selector's matchLabels holds at most 64 labels")))

	// Another tenant's XR, created after, is checked and released in time.
	start := time.Now()
	fine := xrNaming(other, "fine", "ClusterProviderConfig", granted)
	g.Eventually(func() error { return otc.Create(ctx, fine) }, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getXR(g, fine).GetAnnotations()).NotTo(HaveKey(infrav1.CrossplanePausedAnnotation))
	}, 20*time.Second, interval).Should(Succeed(), "another tenant's XR is released while the loop is reconciled")
	t.Logf("another tenant's XR released %v after it was created", time.Since(start).Round(time.Millisecond))

	// The loop stays held; the bridge reconciled it (its events) without
	// growing.
	g.Consistently(held, 3*time.Second, 500*time.Millisecond).Should(Succeed())
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	t.Logf("heap in use %d MiB -> %d MiB", before.HeapInuse>>20, after.HeapInuse>>20)
	g.Expect(after.HeapInuse).To(BeNumerically("<", before.HeapInuse+256<<20), "the bridge's heap grew reconciling one self-referencing XR")
}

// Kinds a tenant makes up cost everyone else nothing: 40 of its XRs, each
// whose resource references name 256 kinds of groups no API server serves,
// and another tenant's XR created after them is still released in seconds.
// Each made-up kind used to have the manager's REST mapper read the API
// server's whole discovery, under a lock every reconcile waits on.
func TestMadeUpKindsInResourceRefsStallNoOne(t *testing.T) {
	stack(t)
	g := NewWithT(t)
	ns, _, granted, _ := tenantBesideSharedCredentials(t)
	other := tenant(t, nil)
	grantTo(t, granted, granted, infrav1.AllowedNamespaces{Names: []string{ns, other}})
	tc, otc := tenantClient(t, ns), tenantClient(t, other)
	newXR := func(ns, name string) *unstructured.Unstructured {
		xr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"providerConfigRef": map[string]any{"apiGroup": credsGroup, "kind": "ClusterProviderConfig", "name": granted},
		}}}
		xr.SetGroupVersionKind(clusterGVK)
		xr.SetNamespace(ns)
		xr.SetName(name)
		return xr
	}
	for i := range 40 {
		xr := newXR(ns, fmt.Sprintf("made-up-%02d", i))
		refs := make([]any, policies.MaxResourceRefs)
		for j := range refs {
			refs[j] = map[string]any{"apiVersion": fmt.Sprintf("g%02d-%03d.made-up.example/v1", i, j), "kind": "Thing", "name": "x"}
		}
		g.Expect(unstructured.SetNestedSlice(xr.Object, refs, "spec", "crossplane", "resourceRefs")).To(Succeed())
		g.Eventually(func() error { return tc.Create(ctx, xr) }, timeout, interval).Should(Succeed())
	}
	time.Sleep(2 * time.Second)

	start := time.Now()
	fine := newXR(other, "fine")
	g.Eventually(func() error { return otc.Create(ctx, fine) }, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getXR(g, fine).GetAnnotations()).NotTo(HaveKey(infrav1.CrossplanePausedAnnotation))
	}, 5*time.Second, interval).Should(Succeed(), "another tenant's XR is released beside 40 XRs naming 10240 made-up kinds (without the REST mapper's reading of discovery: 14 s)")
	t.Logf("another tenant's XR released %v after it was created, beside 40 XRs naming 10240 made-up kinds", time.Since(start).Round(time.Millisecond))
}

// An XR held for credentials its namespace may not use stays held when the
// tenant has another of its XRs, released, adopt it (a controller reference
// to the one, a resource reference from it): the released XR's tree holds
// it, but only its own reconcile releases it. It used to be released by the
// adopting XR's and held again by its own, about 20 times a second, and
// Crossplane composed it meanwhile.
func TestAnXRAdoptedByAnotherKeepsItsOwnHold(t *testing.T) {
	stack(t)
	g := NewWithT(t)
	ns, _, granted, _ := tenantBesideSharedCredentials(t)
	grantTo(t, granted, granted, infrav1.AllowedNamespaces{Names: []string{ns}})
	tc := tenantClient(t, ns)
	// Its own config on the provider's ambient identity: held (a
	// credentials webhook, when one runs, admits it held).
	ambientConfig(g, tc, ns)
	newXR := func(name, kind, config string) *unstructured.Unstructured { return xrNaming(ns, name, kind, config) }
	untilAdmissionHolds(g, tc, ns)
	adopter, adopted := newXR("adopter", "ClusterProviderConfig", granted), newXR("adopted", "ProviderConfig", "ambient")
	adopted.SetAnnotations(map[string]string{infrav1.CrossplanePausedAnnotation: "true"})
	g.Eventually(func() error { return tc.Create(ctx, adopter) }, timeout, interval).Should(Succeed())
	g.Eventually(func() error { return tc.Create(ctx, adopted) }, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getXR(g, adopter).GetAnnotations()).NotTo(HaveKey(infrav1.CrossplanePausedAnnotation))
		g.Expect(getXR(g, adopted).GetAnnotations()).To(HaveKeyWithValue(infrav1.CredentialsHoldAnnotation, "true"))
	}, timeout, interval).Should(Succeed())

	g.Eventually(func() error {
		got := getXR(g, adopted)
		got.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterGVK.GroupVersion().String(), Kind: clusterGVK.Kind, Name: "adopter", UID: getXR(g, adopter).GetUID(), Controller: ptr.To(true)}})
		return tc.Update(ctx, got)
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() error {
		got := getXR(g, adopter)
		refs, _, _ := unstructured.NestedSlice(got.Object, "spec", "crossplane", "resourceRefs")
		refs = append(refs, map[string]any{"apiVersion": clusterGVK.GroupVersion().String(), "kind": clusterGVK.Kind, "name": "adopted"})
		g.Expect(unstructured.SetNestedSlice(got.Object, refs, "spec", "crossplane", "resourceRefs")).To(Succeed())
		return tc.Update(ctx, got)
	}, timeout, interval).Should(Succeed())

	before := getXR(g, adopted).GetResourceVersion()
	g.Consistently(func(g Gomega) {
		got := getXR(g, adopted)
		g.Expect(got.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"), "the adopted XR stays paused")
		g.Expect(got.GetAnnotations()).To(HaveKeyWithValue(infrav1.CredentialsHoldAnnotation, "true"))
	}, 5*time.Second, 20*time.Millisecond).Should(Succeed())
	g.Expect(getXR(g, adopted).GetResourceVersion()).To(Equal(before), "nothing fights over the adopted XR")
}

// xrNaming is a CrossplaneCluster in ns naming a config of the test
// provider's.
func xrNaming(ns, name, kind, config string) *unstructured.Unstructured {
	xr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"providerConfigRef": map[string]any{"apiGroup": credsGroup, "kind": kind, "name": config},
	}}}
	xr.SetGroupVersionKind(clusterGVK)
	xr.SetNamespace(ns)
	xr.SetName(name)
	return xr
}

// untilAdmissionHolds waits until the API server, which loads the bridge's
// admission policies asynchronously, holds a new XR of the tenant's that
// names its own config "ambient" (a dry run).
func untilAdmissionHolds(g Gomega, tc client.Client, ns string) {
	g.Eventually(func(g Gomega) {
		probe := xrNaming(ns, "probe", "ProviderConfig", "ambient")
		g.Expect(tc.Create(ctx, probe, client.DryRunAll)).To(Succeed())
		g.Expect(probe.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
	}, timeout, interval).Should(Succeed())
}

// ambientConfig creates the tenant's own ProviderConfig "ambient", on the
// provider's injected identity, which no tenant may use.
func ambientConfig(g Gomega, tc client.Client, ns string) {
	g.Expect(tc.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": credsGroup + "/v1beta1", "kind": "ProviderConfig",
		"metadata": map[string]any{"name": "ambient", "namespace": ns}, "spec": map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}},
	}})).To(Succeed())
}
