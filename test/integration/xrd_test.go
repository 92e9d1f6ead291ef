package integration

import (
	"strings"
	"testing"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// installedPlatformXRD installs, in a new namespace's own group, a platform
// XRD of kind; it returns the namespace, the kind's version and the XRD.
func installedPlatformXRD(t *testing.T, prefix, kind, plural string) (string, schema.GroupVersionKind, *xpextv2.CompositeResourceDefinition) {
	t.Helper()
	ns := namespace(t)
	group := uniqueGroup(ns, prefix)
	x := platformXRD(t, group, kind, plural)
	_, err := env.InstallXRD(ctx, x)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return ns, schema.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: kind}, x
}

// platformXRD is a platform team's own cluster abstraction: CAPXP's cluster
// schema under another group and kind, declaring only capxp.dev/contract.
func platformXRD(t *testing.T, group, kind, plural string) *xpextv2.CompositeResourceDefinition {
	t.Helper()
	xrds, err := envtest.ReadXRDs(envtest.RepoRoot() + "/compositions/xrds")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var x *xpextv2.CompositeResourceDefinition
	for _, candidate := range xrds {
		if candidate.Spec.Names.Kind == infrav1.CrossplaneClusterKind {
			x = candidate.DeepCopy()
		}
	}
	x.Spec.Group = group
	x.Spec.Names = extNames(kind, plural)
	x.Name = plural + "." + group
	// Copied from an XRD of a release that still labelled its XRDs as
	// clusterctl's: the bridge takes the provider label off.
	x.Labels = map[string]string{infrav1.ContractLabel: infrav1.ContractInfraCluster, infrav1.ProviderLabel: infrav1.ProviderName}
	return x
}

func xrdCondition(g Gomega, name string) *metav1.Condition {
	x := &xpextv2.CompositeResourceDefinition{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, x)).To(Succeed())
	for _, c := range x.Status.Conditions {
		if string(c.Type) == infrav1.ContractAdaptedCondition {
			return &metav1.Condition{Type: string(c.Type), Status: metav1.ConditionStatus(c.Status), Reason: string(c.Reason), Message: c.Message}
		}
	}
	return nil
}

// A platform team publishes its own XRD (another group, another kind). The
// bridge completes its contract label, Crossplane copies it to the CRD, and a
// CAPI Cluster can then use the new kind exactly like CrossplaneCluster.
func TestAPlatformTeamsOwnXRDWorksTheSame(t *testing.T) {
	g := NewWithT(t)
	ns, gvk, x := installedPlatformXRD(t, "platform", "EKSCluster", "eksclusters")
	stack(t)

	// The bridge labels the XRD with CAPI's contract version; Crossplane's
	// XRD controller copies the label to the CRD, where CAPI looks for it.
	g.Eventually(func(g Gomega) {
		got := &xpextv2.CompositeResourceDefinition{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: x.Name}, got)).To(Succeed())
		g.Expect(got.Labels).To(HaveKeyWithValue(infrav1.CAPIContractLabel, "v1alpha1"))
		// clusterctl moves the kind; its upgrade and delete would delete
		// an XRD that also carried the provider's label.
		g.Expect(got.Labels).To(HaveKey(infrav1.ClusterctlLabel))
		g.Expect(got.Labels).NotTo(HaveKey(infrav1.ProviderLabel))
		crd := &extv1.CustomResourceDefinition{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: x.Name}, crd)).To(Succeed())
		g.Expect(crd.Labels).To(HaveKeyWithValue(infrav1.CAPIContractLabel, "v1alpha1"))
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c := xrdCondition(g, x.Name)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(Equal("EKSCluster " + gvk.Group + "/v1alpha1 is a CAPI InfraCluster"))
	}, timeout, interval).Should(Succeed())

	cluster, xr := newCluster(t, ns, "eks", gvk, map[string]string{envtest.ObserveAnnotation: script(goodStatus)})
	g.Eventually(func(g Gomega) {
		c := getCluster(g, cluster)
		g.Expect(ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false)).To(BeTrue())
		g.Expect(c.Spec.ControlPlaneEndpoint.Host).To(Equal("lb-1.elb.eu-west-1.amazonaws.com"))
	}, timeout, interval).Should(Succeed())

	// The platform team withdraws the contract: the bridge stops adapting the
	// kind at run time, and a new XR of it is no longer taken on.
	got := &xpextv2.CompositeResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: x.Name}}
	change(g, got, func() { delete(got.Labels, infrav1.ContractLabel) })
	_, later := newCluster(t, ns, "eks-later", gvk, map[string]string{envtest.ObserveAnnotation: script(goodStatus)})
	// The XRs it took on are handed back to Crossplane alone.
	g.Eventually(func(g Gomega) {
		g.Expect(getXR(g, xr).GetFinalizers()).NotTo(ContainElement(infrav1.Finalizer))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(getXR(g, later).GetFinalizers()).NotTo(ContainElement(infrav1.Finalizer))
	}, "1s", interval).Should(Succeed())
}

// Deleting an adapted XRD finishes: its XRs are deleted, the bridge deletes
// what they composed and lets them go although the XRD is going, and
// Crossplane then deletes the CRD. Crossplane v2.3 waits for the XRs of a
// deleted XRD but does not delete namespaced ones itself (it asks the API
// server for a cluster-wide delete-collection, which is not served for
// namespaced kinds, and ignores the not-found answer), so the user deletes
// them, as docs/bridge.md says.
func TestDeletingAnAdaptedXRDFinishes(t *testing.T) {
	g := NewWithT(t)
	ns, gvk, x := installedPlatformXRD(t, "gone", "GoneCluster", "goneclusters")
	stack(t)
	g.Eventually(func(g Gomega) {
		g.Expect(xrdCondition(g, x.Name)).To(HaveField("Status", metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())
	_, xr := newCluster(t, ns, "gone", gvk, map[string]string{envtest.ObserveAnnotation: script(goodStatus)})
	g.Eventually(func(g Gomega) {
		g.Expect(provisioned(getXR(g, xr))).To(BeTrue())
		g.Expect(getXR(g, xr).GetFinalizers()).To(ContainElement(infrav1.Finalizer))
	}, timeout, interval).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, &xpextv2.CompositeResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: x.Name}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		events := &corev1.EventList{}
		g.Expect(env.Client.List(ctx, events, client.MatchingFields{"involvedObject.name": x.Name})).To(Succeed())
		g.Expect(events.Items).To(ContainElement(HaveField("Message", "waiting for defined composite resources to be deleted")))
	}, timeout, interval).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, getXR(g, xr))).To(Succeed())
	g.Eventually(func(g Gomega) {
		// The provider finishes deleting what the XR composed.
		for _, s := range stubs(g, ns) {
			if !s.GetDeletionTimestamp().IsZero() {
				release(g, &s)
			}
		}
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: x.Name}, &extv1.CustomResourceDefinition{}))).To(BeTrue(), "the CRD is gone")
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: x.Name}, &xpextv2.CompositeResourceDefinition{}))).To(BeTrue(), "the XRD is gone")
		g.Expect(stubs(g, ns)).To(BeEmpty(), "nothing composed is left")
	}, 2*timeout, interval).Should(Succeed())
}

// An XRD that declares the contract but cannot implement it is reported on
// the XRD (condition and event) and its kind is not adapted.
func TestAMalformedXRDIsReportedAndNotAdapted(t *testing.T) {
	cases := map[string]struct {
		xrd    func(ns string) *xpextv2.CompositeResourceDefinition
		reason string
		want   string
	}{
		"plural-capi-cannot-find": {
			xrd: func(ns string) *xpextv2.CompositeResourceDefinition {
				return platformXRD(t, uniqueGroup(ns, "odd"), "Widget", "widgetz")
			},
			reason: "InvalidNames",
			want:   `spec.names.plural: Invalid value: "widgetz": must be "widgets": CAPI looks up the CRD widgets.`,
		},
		"missing-contract-field": {
			xrd: func(ns string) *xpextv2.CompositeResourceDefinition {
				x := platformXRD(t, uniqueGroup(ns, "thin"), "ThinCluster", "thinclusters")
				x.Spec.Versions[0].Schema.OpenAPIV3Schema.Raw = []byte(`{"type":"object","properties":{"spec":{"type":"object","properties":{"controlPlaneEndpoint":{"type":"object","properties":{"host":{"type":"string"},"port":{"type":"integer"}}}}}}}`)
				return x
			},
			reason: "MissingSchemaField",
			want:   "CAPI's InfraCluster contract needs status.initialization.provisioned of type boolean",
		},
	}
	stack(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ns := namespace(t)
			x := tc.xrd(ns)
			_, err := env.InstallXRD(ctx, x)
			g.Expect(err).NotTo(HaveOccurred())

			g.Eventually(func(g Gomega) {
				c := xrdCondition(g, x.Name)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(c.Reason).To(Equal(tc.reason))
				g.Expect(c.Message).To(ContainSubstring(tc.want))
				events := &corev1.EventList{}
				g.Expect(env.Client.List(ctx, events, client.MatchingFields{"involvedObject.name": x.Name})).To(Succeed())
				g.Expect(events.Items).To(ContainElement(And(
					HaveField("Type", "Warning"), HaveField("Reason", tc.reason), HaveField("Message", ContainSubstring(tc.want)),
				)))
			}, timeout, interval).Should(Succeed())

			// The kind is not adapted: an XR of it is never taken on.
			gvk := schema.GroupVersionKind{Group: x.Spec.Group, Version: "v1alpha1", Kind: x.Spec.Names.Kind}
			_, xr := newCluster(t, ns, "unadapted", gvk, nil)
			g.Consistently(func(g Gomega) {
				got := getXR(g, xr)
				g.Expect(got.GetFinalizers()).NotTo(ContainElement(infrav1.Finalizer))
				crossplaneConditionsOnly(g, got)
				g.Expect(got.GetAnnotations()).NotTo(HaveKey(infrav1.CrossplanePausedAnnotation))
			}, "1s", interval).Should(Succeed())
		})
	}
}

func extNames(kind, plural string) extv1.CustomResourceDefinitionNames {
	return extv1.CustomResourceDefinitionNames{
		Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind),
		Categories: []string{"cluster-api"},
	}
}

// uniqueGroup names an API group after a test's namespace, so that a test can
// run again (go test -count) in the same API server.
func uniqueGroup(ns, prefix string) string {
	return prefix + "-" + strings.TrimPrefix(ns, "capxp-test-") + ".example.org"
}

// A platform team moves its kind to a new referenceable version: the bridge
// stops the old version's controller (and its informer) and adapts the new
// one, which CAPI then resolves through the CRD's contract label.
func TestAChangedReferenceableVersionReplacesTheController(t *testing.T) {
	g := NewWithT(t)
	ns, gvk, x := installedPlatformXRD(t, "moving", "MovingCluster", "movingclusters")
	bridge := stack(t)
	g.Eventually(func(g Gomega) {
		g.Expect(xrdCondition(g, x.Name)).To(HaveField("Message", "MovingCluster "+gvk.Group+"/v1alpha1 is a CAPI InfraCluster"))
	}, timeout, interval).Should(Succeed())

	// A Composition's type reference names a version: the team publishes
	// one for the new version and makes it the default.
	comp, err := envtest.Composition(schema.GroupVersionKind{Group: gvk.Group, Version: "v1alpha2", Kind: "MovingCluster"})
	g.Expect(err).NotTo(HaveOccurred())
	comp.Name += "-v1alpha2"
	g.Expect(env.Client.Create(ctx, comp)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, comp) })
	got := &xpextv2.CompositeResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: x.Name}}
	change(g, got, func() {
		next := *got.Spec.Versions[0].DeepCopy()
		next.Name = "v1alpha2"
		got.Spec.Versions[0].Referenceable = false
		got.Spec.Versions = append(got.Spec.Versions, next)
		got.Spec.DefaultCompositionRef = &xpextv2.CompositionReference{Name: comp.Name}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(xrdCondition(g, x.Name)).To(HaveField("Message", "MovingCluster "+gvk.Group+"/v1alpha2 is a CAPI InfraCluster"))
		g.Expect(bridge.Logs.Containing("Stopped adapting composite resource kind", gvk.Group+"/v1alpha1")).To(HaveLen(1), "the old version's controller is stopped")
		g.Expect(bridge.Logs.Containing("Adapted composite resource kind", gvk.Group+"/v1alpha2")).To(HaveLen(1))
	}, timeout, interval).Should(Succeed())

	// CAPI follows the contract label to the new version (newCluster retries
	// while the API server's admission policies answer 503 for it).
	cluster, _ := newCluster(t, ns, "moved", schema.GroupVersionKind{Group: gvk.Group, Version: "v1alpha2", Kind: "MovingCluster"},
		map[string]string{envtest.ObserveAnnotation: script(goodStatus)})
	g.Eventually(func(g Gomega) {
		g.Expect(ptr.Deref(getCluster(g, cluster).Status.Initialization.InfrastructureProvisioned, false)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
}

// admitted waits until the API server admits an XR of a kind: right after
// a kind or version appears, the admission policies that match it answer
// 503 until the API server can resolve it.
func admitted(t *testing.T, ns string, gvk schema.GroupVersionKind) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		probe := &unstructured.Unstructured{}
		probe.SetGroupVersionKind(gvk)
		probe.SetNamespace(ns)
		probe.SetGenerateName("probe-")
		probe.Object["spec"] = map[string]any{}
		err := env.Client.Create(ctx, probe, client.DryRunAll)
		g.Expect(apierrors.IsServiceUnavailable(err)).To(BeFalse(), "%v", err)
	}, timeout, interval).Should(Succeed())
}
