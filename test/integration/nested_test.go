package integration

import (
	"testing"
	"time"

	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// A platform cluster kind whose Composition composes another XR (a plain
// Crossplane kind, no contract), which composes a Stub: when the grant its
// credentials rely on is revoked, the bridge pauses what the nested XR
// composed too, within 5 s, and resumes it when a grant returns.
func TestARevokedGrantPausesWhatNestedXRsComposed(t *testing.T) {
	g := NewWithT(t)
	ns := tenant(t, nil)
	group := uniqueGroup(ns, "nest")
	config := "nested" + uniqueGroup(ns, "")
	clusterProviderConfig(t, config, ns)
	grant := grantTo(t, config, config, infrav1.AllowedNamespaces{Names: []string{ns}})

	// The nested kind: CAPXP's cluster schema, declaring no contract, composed
	// by the test Composition into a Stub.
	inner := platformXRD(t, group, "InnerNet", "innernets")
	delete(inner.Labels, infrav1.ContractLabel)
	_, err := env.InstallXRD(ctx, inner)
	g.Expect(err).NotTo(HaveOccurred())
	innerGVK := schema.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: "InnerNet"}

	// The cluster kind, whose Composition (created before the XRD, so that
	// it is the XRD's default) composes an InnerNet with the XR's
	// credentials and observation script.
	outerGVK := schema.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: "OuterCluster"}
	g.Expect(env.Client.Create(ctx, nestingComposition(t, outerGVK, innerGVK))).To(Succeed())
	_, err = env.InstallXRD(ctx, platformXRD(t, group, "OuterCluster", "outerclusters"))
	g.Expect(err).NotTo(HaveOccurred())
	stack(t)
	g.Eventually(func(g Gomega) {
		g.Expect(xrdCondition(g, "outerclusters."+group)).To(HaveField("Status", metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())
	admitted(t, ns, outerGVK)

	xr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"providerConfigRef": map[string]any{"apiGroup": credsGroup, "kind": "ClusterProviderConfig", "name": config},
	}}}
	xr.SetGroupVersionKind(outerGVK)
	xr.SetNamespace(ns)
	xr.SetName("nesting")
	xr.SetAnnotations(map[string]string{envtest.ObserveAnnotation: script(goodStatus)})
	g.Expect(env.Client.Create(ctx, xr)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, xr) })

	// Granted: the bridge releases it, Crossplane composes the InnerNet, and
	// the InnerNet a Stub.
	var stub unstructured.Unstructured
	g.Eventually(func(g Gomega) {
		s := stubs(g, ns)
		g.Expect(s).To(HaveLen(1))
		stub = s[0]
		g.Expect(metav1.GetControllerOf(&stub)).To(HaveField("Kind", "InnerNet"))
	}, timeout, interval).Should(Succeed())

	// stubNow reads the Stub as it is now.
	stubNow := func(g Gomega) *unstructured.Unstructured {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(envtest.StubGVK)
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(&stub), got)).To(Succeed())
		return got
	}
	g.Expect(env.Client.Delete(ctx, grant)).To(Succeed())
	revokedAt := time.Now()
	g.Eventually(func(g Gomega) {
		got := stubNow(g).GetAnnotations()
		g.Expect(got).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
		g.Expect(got).To(HaveKeyWithValue(infrav1.CredentialsHoldAnnotation, "true"))
	}, 5*time.Second, interval).Should(Succeed(), "what the nested XR composed is paused within 5 s")
	t.Logf("the nested XR's Stub paused %s after the grant was revoked", time.Since(revokedAt).Round(time.Millisecond))

	// Someone lifts the hold on the Stub: its own event wakes the XR at
	// the top of the tree, which holds it again.
	lifted := stubNow(g)
	orig := lifted.DeepCopy()
	annotations := lifted.GetAnnotations()
	delete(annotations, infrav1.CrossplanePausedAnnotation)
	delete(annotations, infrav1.CredentialsHoldAnnotation)
	lifted.SetAnnotations(annotations)
	g.Expect(env.Client.Patch(ctx, lifted, client.MergeFrom(orig))).To(Succeed())
	liftedAt := time.Now()
	g.Eventually(func(g Gomega) {
		g.Expect(stubNow(g).GetAnnotations()).To(HaveKeyWithValue(infrav1.CredentialsHoldAnnotation, "true"))
	}, 5*time.Second, interval).Should(Succeed(), "a hold lifted on what the nested XR composed is set again within 5 s")
	t.Logf("the Stub held again %s after its hold was lifted", time.Since(liftedAt).Round(time.Millisecond))

	grantTo(t, config+"-again", config, infrav1.AllowedNamespaces{Names: []string{ns}})
	g.Eventually(func(g Gomega) {
		g.Expect(stubNow(g).GetAnnotations()).NotTo(HaveKey(infrav1.CrossplanePausedAnnotation))
	}, timeout, interval).Should(Succeed(), "granted again, it resumes")
}

// nestingComposition composes, for an XR of kind outer, one XR of kind inner
// with the outer's credentials and observation script.
func nestingComposition(t *testing.T, outer, inner schema.GroupVersionKind) *xpextv1.Composition {
	t.Helper()
	fromXR := func(path string) map[string]any {
		return map[string]any{"type": "FromCompositeFieldPath", "fromFieldPath": path, "toFieldPath": path}
	}
	comp, err := envtest.PatchAndTransform(envtest.CompositionName(outer), outer, map[string]any{
		"name": "network",
		"base": map[string]any{"apiVersion": inner.GroupVersion().String(), "kind": inner.Kind, "spec": map[string]any{}},
		"patches": []any{
			fromXR("spec.providerConfigRef"),
			fromXR("metadata.annotations[" + envtest.ObserveAnnotation + "]"),
		},
	})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return comp
}
