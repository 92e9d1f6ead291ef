package integration

import (
	"testing"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// A platform team installs CAPXP's XRDs; Crossplane generates the XR CRDs
// from them. CAPI must then resolve the v1alpha1 contract version from those
// generated CRDs alone.
func TestCAPIResolvesTheContractThroughTheXRD(t *testing.T) {
	xrds, err := envtest.ReadXRDs(envtest.RepoRoot() + "/compositions/xrds")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(xrds).To(HaveLen(4))

	for _, xrd := range xrds {
		t.Run(xrd.Spec.Names.Kind, func(t *testing.T) {
			g := NewWithT(t)
			ns := namespace(t)

			// The CRD in the API server is the one xcrd generated from the XRD:
			// owned by it, and labelled only because the XRD is.
			crd := &extv1.CustomResourceDefinition{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: xrd.Name}, crd)).To(Succeed())
			g.Expect(metav1.GetControllerOf(crd)).NotTo(BeNil())
			g.Expect(metav1.GetControllerOf(crd).Kind).To(Equal(xpextv2.CompositeResourceDefinitionKind))
			g.Expect(crd.Labels).To(HaveKeyWithValue(infrav1.CAPIContractLabel, "v1alpha1"))
			g.Expect(crd.Labels).To(HaveKeyWithValue(infrav1.ContractLabel, xrd.Labels[infrav1.ContractLabel]))
			g.Expect(crd.Spec.Scope).To(Equal(extv1.NamespaceScoped))

			xr := &unstructured.Unstructured{}
			xr.SetAPIVersion(infrav1.GroupVersion.String())
			xr.SetKind(xrd.Spec.Names.Kind)
			xr.SetNamespace(ns)
			xr.SetName("contract")
			g.Expect(unstructured.SetNestedField(xr.Object, minimalSpec(xrd.Spec.Names.Kind), "spec")).To(Succeed())
			g.Expect(env.Client.Create(ctx, xr)).To(Succeed())

			got, err := external.GetObjectFromContractVersionedRef(ctx, env.Client, clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group,
				Kind:     xrd.Spec.Names.Kind,
				Name:     "contract",
			}, ns)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.GetAPIVersion()).To(Equal("infrastructure.cluster.x-k8s.io/v1alpha1"))
			g.Expect(got.GetUID()).To(Equal(xr.GetUID()))
		})
	}
}

// The contract label is what makes the difference: the same kind of XRD
// without it is not resolvable by CAPI.
func TestCAPIRefusesAnXRDWithoutTheContractLabel(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)

	xrds, err := envtest.ReadXRDs(envtest.RepoRoot() + "/compositions/xrds")
	g.Expect(err).NotTo(HaveOccurred())
	xrd := xrds[0].DeepCopy()
	xrd.Spec.Group = uniqueGroup(ns, "unlabelled")
	xrd.Name = xrd.Spec.Names.Plural + "." + xrd.Spec.Group
	// Neither label: the bridge would complete the contract label otherwise.
	delete(xrd.Labels, infrav1.CAPIContractLabel)
	delete(xrd.Labels, infrav1.ContractLabel)
	_, err = env.InstallXRD(ctx, xrd)
	g.Expect(err).NotTo(HaveOccurred())

	xr := &unstructured.Unstructured{}
	xr.SetAPIVersion(xrd.Spec.Group + "/v1alpha1")
	xr.SetKind(xrd.Spec.Names.Kind)
	xr.SetNamespace(ns)
	xr.SetName("unlabelled")
	g.Expect(unstructured.SetNestedField(xr.Object, minimalSpec(xrd.Spec.Names.Kind), "spec")).To(Succeed())
	g.Expect(env.Client.Create(ctx, xr)).To(Succeed())

	_, err = external.GetObjectFromContractVersionedRef(ctx, env.Client, clusterv1.ContractVersionedObjectReference{
		APIGroup: xrd.Spec.Group, Kind: xrd.Spec.Names.Kind, Name: "unlabelled",
	}, ns)
	g.Expect(err).To(MatchError(ContainSubstring("cannot find any versions matching contract")))
}

// A CAPI Cluster pointing at a CrossplaneCluster is reconciled by CAPI's real
// Cluster reconciler: it adopts the XR, and once the XR reports the contract
// fields the Cluster is provisioned with the XR's endpoint.
func TestCAPIClusterReconcilerAdoptsACrossplaneCluster(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)

	capi, err := env.StartCAPI(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(capi.Stop()).To(Succeed()) }()

	xr := &infrav1.CrossplaneCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha"},
		Spec: infrav1.CrossplaneClusterSpec{
			Parameters: infrav1.CrossplaneClusterParameters{Region: "eu-west-1"},
		},
	}
	g.Expect(env.Client.Create(ctx, xr)).To(Succeed())

	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha"},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group,
				Kind:     infrav1.CrossplaneClusterKind,
				Name:     xr.Name,
			},
		},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())

	// CAPI adopts the XR: owner reference and cluster-name label.
	g.Eventually(func(g Gomega) {
		got := &infrav1.CrossplaneCluster{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(xr), got)).To(Succeed())
		g.Expect(got.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, cluster.Name))
		g.Expect(got.OwnerReferences).To(ContainElement(And(
			HaveField("Kind", "Cluster"),
			HaveField("Name", cluster.Name),
			HaveField("UID", cluster.UID),
		)))
	}, timeout, interval).Should(Succeed())

	// Until the XR says it is provisioned, neither is the Cluster.
	g.Consistently(func(g Gomega) {
		got := &clusterv1.Cluster{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), got)).To(Succeed())
		g.Expect(ptr.Deref(got.Status.Initialization.InfrastructureProvisioned, false)).To(BeFalse())
	}, "1s", interval).Should(Succeed())

	// What the bridge will write: the endpoint in spec, provisioned in status.
	change(g, xr, func() { xr.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "alpha.example.org", Port: 6443} })
	before := xr.DeepCopy()
	xr.Status.Initialization.Provisioned = ptr.To(true)
	xr.Status.Ready = true
	g.Expect(env.Client.Status().Patch(ctx, xr, client.MergeFrom(before))).To(Succeed())

	g.Eventually(func(g Gomega) {
		c := &clusterv1.Cluster{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
		g.Expect(ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false)).To(BeTrue())
		g.Expect(c.Spec.ControlPlaneEndpoint.Host).To(Equal("alpha.example.org"))
		g.Expect(c.Spec.ControlPlaneEndpoint.Port).To(BeEquivalentTo(6443))
	}, timeout, interval).Should(Succeed())
}

// CAPI's template cloning (used by MachineSets and control planes) turns a
// CrossplaneMachineTemplate into a CrossplaneMachine the API server accepts.
func TestCAPIClonesACrossplaneMachineTemplate(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)

	tmpl := &infrav1.CrossplaneMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers"},
		Spec: infrav1.CrossplaneMachineTemplateSpec{Template: infrav1.CrossplaneMachineTemplateResource{
			ObjectMeta: infrav1.TemplateObjectMeta{
				Labels:      map[string]string{"tier": "worker"},
				Annotations: map[string]string{infrav1.CrossplanePausedAnnotation: "true"},
			},
			Spec: infrav1.CrossplaneMachineSpec{
				Parameters: infrav1.CrossplaneMachineParameters{
					Size:       "m6i.large",
					RootVolume: infrav1.RootVolumeParameters{SizeGiB: 40, Type: "gp3"},
				},
				Crossplane: &infrav1.CompositionSpec{
					CompositionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"capxp.dev/backend": "aws"}},
				},
			},
		}},
	}
	g.Expect(env.Client.Create(ctx, tmpl)).To(Succeed())

	created, ref, err := external.CreateFromTemplate(ctx, &external.CreateFromTemplateInput{
		Client:      env.Client,
		TemplateRef: &corev1.ObjectReference{APIVersion: infrav1.GroupVersion.String(), Kind: infrav1.CrossplaneMachineTemplateKind, Namespace: ns, Name: tmpl.Name},
		Namespace:   ns,
		ClusterName: "alpha",
		Labels:      map[string]string{clusterv1.MachineDeploymentNameLabel: "workers"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ref.Kind).To(Equal(infrav1.CrossplaneMachineKind))
	g.Expect(ref.APIGroup).To(Equal(infrav1.GroupVersion.Group))

	m := &infrav1.CrossplaneMachine{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: created.GetName()}, m)).To(Succeed())
	g.Expect(m.Spec.Parameters).To(Equal(tmpl.Spec.Template.Spec.Parameters))
	g.Expect(m.Spec.Crossplane.CompositionSelector.MatchLabels).To(HaveKeyWithValue("capxp.dev/backend", "aws"))
	g.Expect(m.Spec.Bootstrap.DataSecretRef).To(BeNil())
	g.Expect(m.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, "alpha"))
	g.Expect(m.Labels).To(HaveKeyWithValue("tier", "worker"))
	g.Expect(m.Annotations).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
	g.Expect(m.Annotations).To(HaveKeyWithValue(clusterv1.TemplateClonedFromNameAnnotation, tmpl.Name))
}

// minimalSpec is the smallest valid spec of a CAPXP composite resource kind.
func minimalSpec(kind string) map[string]any {
	if kind == infrav1.CrossplaneMachineKind || kind == infrav1.CrossplaneMachinePoolKind {
		return map[string]any{"parameters": map[string]any{"size": "small"}}
	}
	return map[string]any{}
}
