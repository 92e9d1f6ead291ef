package integration

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// A tenant tries every way it has to compose with shared credentials its
// namespace was never granted: every field of the reference, on create and
// on update, every contract, with and without a CAPI owner, another
// Composition, a preset bootstrap data reference, a machine overriding its
// cluster. No managed resource the real Crossplane composes in the namespace
// ever names a ClusterProviderConfig other than the granted one: 0 admitted.
var (
	controlPlaneGVK = infrav1.GroupVersion.WithKind(infrav1.CrossplaneControlPlaneKind)
	machinePoolGVK  = infrav1.GroupVersion.WithKind(infrav1.CrossplaneMachinePoolKind)
)

func TestNoAttemptComposesWithUngrantedCredentials(t *testing.T) {
	stack(t)
	g := NewWithT(t)
	ns, suffix, granted, ungranted := tenantBesideSharedCredentials(t)
	providerConfig(t, ns, "own", true)
	grantTo(t, "granted"+suffix, granted, infrav1.AllowedNamespaces{Names: []string{ns}})
	waitForCredentialsWebhook(t, ns)

	// A second Composition the platform offers for clusters.
	alt, err := envtest.Composition(clusterGVK)
	g.Expect(err).NotTo(HaveOccurred())
	alt.Name = "alternative" + suffix
	g.Expect(env.Client.Create(ctx, alt)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, alt) })

	ref := func(group, kind, name string) map[string]any {
		return map[string]any{"apiGroup": group, "kind": kind, "name": name}
	}
	own := ref(credsGroup, "ProviderConfig", "own")
	type attempt struct {
		gvk   schema.GroupVersionKind
		owned bool
		// spec is what the XR is created with; update, when set, is the
		// spec it is then changed to.
		spec, update map[string]any
	}
	attempts := map[string]attempt{
		"cluster-owned-name":                {gvk: clusterGVK, owned: true, spec: map[string]any{"providerConfigRef": ref(credsGroup, "ClusterProviderConfig", ungranted)}},
		"cluster-unowned-name":              {gvk: clusterGVK, spec: map[string]any{"providerConfigRef": ref(credsGroup, "ClusterProviderConfig", ungranted)}},
		"cluster-owned-group":               {gvk: clusterGVK, owned: true, spec: map[string]any{"providerConfigRef": ref("kubernetes.m.crossplane.io", "ClusterProviderConfig", granted)}},
		"cluster-unowned-group":             {gvk: clusterGVK, spec: map[string]any{"providerConfigRef": ref("kubernetes.m.crossplane.io", "ClusterProviderConfig", granted)}},
		"cluster-owned-kind":                {gvk: clusterGVK, owned: true, spec: map[string]any{"providerConfigRef": ref(credsGroup, "ProviderConfig", ungranted)}, update: map[string]any{"providerConfigRef": ref(credsGroup, "ClusterProviderConfig", ungranted)}},
		"cluster-owned-update-name":         {gvk: clusterGVK, owned: true, spec: map[string]any{"providerConfigRef": own}, update: map[string]any{"providerConfigRef": ref(credsGroup, "ClusterProviderConfig", ungranted)}},
		"cluster-unowned-update-group":      {gvk: clusterGVK, spec: map[string]any{"providerConfigRef": ref(credsGroup, "ClusterProviderConfig", granted)}, update: map[string]any{"providerConfigRef": ref("kubernetes.m.crossplane.io", "ClusterProviderConfig", granted)}},
		"cluster-another-composition":       {gvk: clusterGVK, owned: true, spec: map[string]any{"providerConfigRef": ref(credsGroup, "ClusterProviderConfig", ungranted), "crossplane": map[string]any{"compositionRef": map[string]any{"name": alt.Name}}}},
		"cluster-update-composition":        {gvk: clusterGVK, owned: true, spec: map[string]any{"providerConfigRef": own}, update: map[string]any{"providerConfigRef": ref(credsGroup, "ClusterProviderConfig", ungranted), "crossplane": map[string]any{"compositionRef": map[string]any{"name": alt.Name}}}},
		"machine-owned-name":                {gvk: machineGVK, owned: true, spec: map[string]any{"providerConfigRef": ref(credsGroup, "ClusterProviderConfig", ungranted)}},
		"machine-unowned-name":              {gvk: machineGVK, spec: map[string]any{"providerConfigRef": ref(credsGroup, "ClusterProviderConfig", ungranted)}},
		"machine-unowned-group":             {gvk: machineGVK, spec: map[string]any{"providerConfigRef": ref("kubernetes.m.crossplane.io", "ClusterProviderConfig", granted)}},
		"machine-overrides-its-cluster":     {gvk: machineGVK, owned: true, spec: map[string]any{}, update: map[string]any{"providerConfigRef": ref(credsGroup, "ClusterProviderConfig", ungranted)}},
		"machine-preset-bootstrap-data":     {gvk: machineGVK, owned: true, spec: map[string]any{"providerConfigRef": ref(credsGroup, "ClusterProviderConfig", ungranted), "bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "data", "key": "value"}}}},
		"machine-unowned-update-kind":       {gvk: machineGVK, spec: map[string]any{"providerConfigRef": ref(credsGroup, "ProviderConfig", ungranted)}, update: map[string]any{"providerConfigRef": ref(credsGroup, "ClusterProviderConfig", ungranted)}},
		"machine-preset-data-update-group":  {gvk: machineGVK, spec: map[string]any{"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "data", "key": "value"}}}, update: map[string]any{"providerConfigRef": ref("kubernetes.m.crossplane.io", "ClusterProviderConfig", granted)}},
		"controlplane-unowned-name":         {gvk: controlPlaneGVK, spec: map[string]any{"providerConfigRef": ref(credsGroup, "ClusterProviderConfig", ungranted)}},
		"controlplane-unowned-group":        {gvk: controlPlaneGVK, spec: map[string]any{"providerConfigRef": ref("kubernetes.m.crossplane.io", "ClusterProviderConfig", granted)}},
		"controlplane-update-name":          {gvk: controlPlaneGVK, spec: map[string]any{"providerConfigRef": own}, update: map[string]any{"providerConfigRef": ref(credsGroup, "ClusterProviderConfig", ungranted)}},
		"machinepool-unowned-name":          {gvk: machinePoolGVK, spec: map[string]any{"providerConfigRef": ref(credsGroup, "ClusterProviderConfig", ungranted)}},
		"machinepool-unowned-group":         {gvk: machinePoolGVK, spec: map[string]any{"providerConfigRef": ref("kubernetes.m.crossplane.io", "ClusterProviderConfig", granted)}},
		"machinepool-overrides-its-cluster": {gvk: machinePoolGVK, spec: map[string]any{}, update: map[string]any{"providerConfigRef": ref(credsGroup, "ClusterProviderConfig", ungranted)}},
	}

	// The cluster every owned attempt belongs to composes with the granted
	// credentials.
	base := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"providerConfigRef": ref(credsGroup, "ClusterProviderConfig", granted)}}}
	base.SetGroupVersionKind(clusterGVK)
	base.SetNamespace(ns)
	base.SetName("base")
	base.SetAnnotations(map[string]string{envtest.ObserveAnnotation: script(networkStatus)})
	g.Expect(env.Client.Create(ctx, base)).To(Succeed())
	g.Expect(env.Client.Create(ctx, capiCluster(ns, "base"))).To(Succeed())

	admitted := 0
	for name, a := range attempts {
		spec := map[string]any{}
		for k, v := range a.spec {
			spec[k] = v
		}
		if a.gvk == machineGVK || a.gvk == machinePoolGVK {
			spec["parameters"] = map[string]any{"size": "m6i.large"}
		}
		xr := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		xr.SetGroupVersionKind(a.gvk)
		xr.SetNamespace(ns)
		xr.SetName(name)
		xr.SetAnnotations(map[string]string{envtest.ObserveAnnotation: script(goodStatus)})
		if a.owned {
			switch a.gvk {
			case clusterGVK:
				g.Expect(env.Client.Create(ctx, capiCluster(ns, name))).To(Succeed())
			default:
				g.Expect(env.Client.Create(ctx, &clusterv1.Machine{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: "base"}},
					Spec: clusterv1.MachineSpec{
						ClusterName:       "base",
						Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("data")},
						InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: machineGVK.Group, Kind: machineGVK.Kind, Name: name},
					},
				})).To(Succeed())
			}
		}
		err := env.Client.Create(ctx, xr)
		if a.update == nil {
			if err == nil {
				admitted++
				t.Errorf("%s: created with ungranted credentials", name)
			} else {
				g.Expect(err).To(MatchError(ContainSubstring("a ClusterProviderConfigGrant with providerConfigRef")), name)
			}
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), name)
		raw, err := json.Marshal(map[string]any{"spec": a.update})
		g.Expect(err).NotTo(HaveOccurred())
		err = env.Client.Patch(ctx, xr, client.RawPatch(types.MergePatchType, raw))
		if err == nil {
			admitted++
			t.Errorf("%s: changed to ungranted credentials", name)
			continue
		}
		g.Expect(err).To(MatchError(ContainSubstring("a ClusterProviderConfigGrant with providerConfigRef")), name)
	}
	g.Expect(admitted).To(BeZero())

	// Whatever Crossplane composed meanwhile uses the granted shared
	// credentials or the namespace's own.
	g.Eventually(func(g Gomega) {
		g.Expect(provisioned(getXR(g, base))).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		composed := stubs(g, ns)
		g.Expect(composed).NotTo(BeEmpty())
		for _, s := range composed {
			r, _, _ := unstructured.NestedStringMap(s.Object, "spec", "providerConfigRef")
			if r["kind"] == "ClusterProviderConfig" {
				g.Expect(r).To(Equal(map[string]string{"apiGroup": credsGroup, "kind": "ClusterProviderConfig", "name": granted}),
					"Stub %s composed for %s uses credentials its namespace was not granted", s.GetName(), s.GetLabels()[compositeLabel])
			}
		}
	}, 3*time.Second, interval).Should(Succeed())
}
