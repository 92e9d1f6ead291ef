package integration

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// A Composition that declares its machines' provider ID
// (capxp.dev/provider-id) gets it written with the gate's injection, on the
// real Crossplane: no machine XR is ever composed without it, and the bridge
// gives a Ready XR no new generation. A report that differs from the
// declared ID, or a template naming a field the XR lacks, is InvalidOutputs
// and never provisioned.
func TestADeclaredProviderIDIsWrittenWhenTheGateOpens(t *testing.T) {
	workload := startWorkload(t)
	stack(t)
	ns := namespace(t)
	cluster := workloadCluster(t, workload, ns, "epsilon")
	for name, template := range map[string]string{
		"declared": "kubernetes://local/{metadata.name}",
		"broken":   "kubernetes://local/{spec.parameters.image}",
	} {
		comp, err := envtest.Composition(machineGVK)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		comp.Name = "test-" + name + "-" + ns
		comp.Annotations = map[string]string{infrav1.ProviderIDAnnotation: template}
		NewWithT(t).Expect(env.Client.Create(ctx, comp)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(ctx, comp) })
	}
	cases := map[string]struct {
		composition string
		reported    string
		// want is the InvalidOutputs message; empty for a provisioned machine.
		want string
	}{
		"declared-and-reported": {composition: "declared", reported: "kubernetes://local/{{name}}"},
		"reported-otherwise": {composition: "declared", reported: "kubernetes://elsewhere/{{name}}",
			want: `status.outputs.providerID: Invalid value: "kubernetes://elsewhere/reported-otherwise": differs from spec.providerID "kubernetes://local/reported-otherwise"`},
		"template-names-a-missing-field": {composition: "broken", reported: "kubernetes://local/{{name}}",
			want: `Composition test-broken-` + ns + `'s capxp.dev/provider-id annotation: "kubernetes://local/{spec.parameters.image}" names spec.parameters.image, which the XR does not set to a string`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			xr := &infrav1.CrossplaneMachine{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
					envtest.ObserveAnnotation: script(map[string]any{"outputs": map[string]any{"providerID": tc.reported}}),
				}},
				Spec: infrav1.CrossplaneMachineSpec{
					Parameters: infrav1.CrossplaneMachineParameters{Size: "small"},
					Crossplane: &infrav1.CompositionSpec{CompositionRef: &infrav1.NameReference{Name: "test-" + tc.composition + "-" + ns}},
				},
			}
			g.Expect(env.Client.Create(ctx, xr)).To(Succeed())
			// Every state of the XR seen from now on: unpaused (open to
			// Crossplane) only with its provider ID.
			var composedWithout []string
			seen := func(u *unstructured.Unstructured) {
				_, paused := u.GetAnnotations()[infrav1.CrossplanePausedAnnotation]
				if id, _, _ := unstructured.NestedString(u.Object, "spec", "providerID"); !paused && id == "" {
					composedWithout = append(composedWithout, u.GetResourceVersion())
				}
			}
			m := bootstrappedMachine(g, ns, name, cluster.Name)
			if tc.want != "" {
				invalidOutputs(g, m, tc.want)
				g.Consistently(func(g Gomega) {
					g.Expect(provisioned(getXR(g, toU(xr)))).To(BeFalse())
				}, "500ms", interval).Should(Succeed())
				return
			}
			var ready *unstructured.Unstructured
			g.Eventually(func(g Gomega) {
				got := getXR(g, toU(xr))
				seen(got)
				g.Expect(provisioned(got)).To(BeTrue())
				ready = got
			}, timeout, interval/4).Should(Succeed())
			g.Expect(composedWithout).To(BeEmpty(), "resource versions of the XR unpaused without spec.providerID")
			id, _, _ := unstructured.NestedString(ready.Object, "spec", "providerID")
			g.Expect(id).To(Equal("kubernetes://local/" + name))
			g.Expect(strings.Split(ready.GetAnnotations()[infrav1.InjectedFromAnnotation], "\n")).To(ContainElement(
				"spec.providerID: Composition test-declared-" + ns + "'s capxp.dev/provider-id annotation"))
			// The provider ID's copy gives the Ready XR no new generation:
			// Crossplane's Ready is for the generation it has.
			g.Consistently(func(g Gomega) {
				got := getXR(g, toU(xr))
				g.Expect(got.GetGeneration()).To(Equal(ready.GetGeneration()))
				g.Expect(xrCondition(got, "Ready")).To(HaveKeyWithValue("observedGeneration", BeNumerically("==", got.GetGeneration())))
			}, "1s", interval).Should(Succeed())
			noVerdict(g, getMachine(g, m))
		})
	}
}
