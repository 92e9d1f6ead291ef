// Package failclosed runs CAPXP on an API server that serves no
// MutatingAdmissionPolicy (as Kubernetes before 1.36), with the real
// Crossplane: the bridge cannot have new XRs held at admission, and must
// neither let one compose unchecked nor keep quiet about it.
package failclosed

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers"
	"github.com/capxp/cluster-api-provider-crossplane/dev/lifeline"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// credsGroup is the test provider's credentials group (test/envtest).
const credsGroup = "creds.test.capxp.dev"

var env *envtest.Environment

func TestMain(m *testing.M) {
	lifeline.Main()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "capxp-failclosed-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env, err = envtest.StartWithCrossplaneOn(context.Background(), dir, 0, map[string]string{
		"runtime-config": "admissionregistration.k8s.io/v1/mutatingadmissionpolicies=false,admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings=false",
		// The admission plugin waits for the kinds it serves, forever.
		"disable-admission-plugins": "MutatingAdmissionPolicy",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot start the test API server and Crossplane:", err)
		fmt.Fprintln(os.Stderr, "Crossplane's logs are in", dir)
		return 1
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "cannot stop the test API server:", err)
	}
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "Crossplane's logs are in", dir)
	}
	return code
}

// Without MutatingAdmissionPolicy, every adapted XRD says what admission does
// instead; a tenant's XR created without the hold is refused with a message
// that says how to create it; one created held is checked by the bridge:
// released with its own credentials, kept held (composing nothing) with an
// ambient identity it was not granted.
func TestWithoutMutatingAdmissionPolicyNothingComposesUnchecked(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	_, err := env.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}, "v1")
	g.Expect(meta.IsNoMatchError(err)).To(BeTrue(), "the API server serves MutatingAdmissionPolicy: %v", err)
	bridge, err := env.StartBridgeAs(ctx, env.Config, controllers.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(bridge.Stop()).To(Succeed()) })

	// Every adapted XRD says so.
	xrds, err := envtest.ReadXRDs(envtest.RepoRoot() + "/compositions/xrds")
	g.Expect(err).NotTo(HaveOccurred())
	for _, x := range xrds {
		g.Eventually(func(g Gomega) {
			got := &xpextv2.CompositeResourceDefinition{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(x), got)).To(Succeed())
			var c *metav1.Condition
			for _, cond := range got.Status.Conditions {
				if string(cond.Type) == infrav1.ContractAdaptedCondition {
					c = &metav1.Condition{Status: metav1.ConditionStatus(cond.Status), Reason: string(cond.Reason), Message: cond.Message}
				}
			}
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(infrav1.AdmissionUnavailableReason))
			g.Expect(c.Message).To(ContainSubstring("it admits one only when created with annotation crossplane.io/paused"))
		}, time.Minute, 100*time.Millisecond).Should(Succeed(), "XRD %s", x.Name)
	}

	ns, err := env.NewNamespace(ctx, "capxp-failclosed")
	g.Expect(err).NotTo(HaveOccurred())
	tc := tenantClient(t, ns)
	for name, source := range map[string]string{"own": "Secret", "ambient": "InjectedIdentity"} {
		creds := map[string]any{"source": source}
		if source == "Secret" {
			creds["secretRef"] = map[string]any{"name": "own-creds", "key": "credentials"}
		}
		g.Expect(env.Client.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": credsGroup + "/v1beta1", "kind": "ProviderConfig",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"credentials": creds},
		}})).To(Succeed())
	}
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own-creds"},
		Data:       map[string][]byte{"credentials": []byte("[default]\n")},
	})).To(Succeed())

	xr := func(name, config string, held bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"providerConfigRef": map[string]any{"apiGroup": credsGroup, "kind": "ProviderConfig", "name": config},
		}}}
		u.SetGroupVersionKind(infrav1.GroupVersion.WithKind(infrav1.CrossplaneClusterKind))
		u.SetNamespace(ns)
		u.SetName(name)
		if held {
			u.SetAnnotations(map[string]string{infrav1.CrossplanePausedAnnotation: "true"})
		}
		return u
	}

	// Without the hold: refused, and told how to create it.
	g.Eventually(func(g Gomega) {
		err := tc.Create(ctx, xr("unheld", "own", false))
		g.Expect(err).To(MatchError(ContainSubstring("this API server cannot add the hold itself")))
	}, time.Minute, 100*time.Millisecond).Should(Succeed())

	// Held, with its own credentials: the bridge releases it and Crossplane
	// composes.
	own := xr("own", "own", true)
	g.Expect(tc.Create(ctx, own)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := own.DeepCopy()
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(own), got)).To(Succeed())
		g.Expect(got.GetAnnotations()).NotTo(HaveKey(infrav1.CrossplanePausedAnnotation))
		g.Expect(stubsOf(g, ns, "own")).NotTo(BeEmpty())
	}, time.Minute, 100*time.Millisecond).Should(Succeed())

	// Held, with an ambient identity not granted: stays held, composes
	// nothing.
	ambient := xr("ambient", "ambient", true)
	g.Expect(tc.Create(ctx, ambient)).To(Succeed())
	g.Eventually(func(g Gomega) {
		evs := &corev1.EventList{}
		g.Expect(env.Client.List(ctx, evs, client.InNamespace(ns))).To(Succeed())
		var msgs []string
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "ambient" && e.Type == corev1.EventTypeWarning {
				msgs = append(msgs, e.Message)
			}
		}
		g.Expect(strings.Join(msgs, "\n")).To(ContainSubstring("a ClusterProviderConfigGrant with credentialSource " + credsGroup + "/InjectedIdentity"))
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		got := ambient.DeepCopy()
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ambient), got)).To(Succeed())
		g.Expect(got.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
		g.Expect(stubsOf(g, ns, "ambient")).To(BeEmpty())
	}, 3*time.Second, 100*time.Millisecond).Should(Succeed())
}

// tenantClient acts as a user bound in ns to exactly the shipped tenant role.
func tenantClient(t *testing.T, ns string) client.Client {
	t.Helper()
	g := NewWithT(t)
	raw, err := os.ReadFile(envtest.RepoRoot() + "/config/rbac/tenant.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	g.Expect(yaml.Unmarshal(raw, role)).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), role)).To(Succeed())
	g.Expect(env.Client.Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}},
	})).To(Succeed())
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "tenant", Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// stubsOf lists the Stubs Crossplane composed for an XR.
func stubsOf(g Gomega, ns, xr string) []unstructured.Unstructured {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(envtest.StubGVK.GroupVersion().WithKind(envtest.StubGVK.Kind + "List"))
	g.Expect(env.Client.List(context.Background(), l, client.InNamespace(ns), client.MatchingLabels{"crossplane.io/composite": xr})).To(Succeed())
	return l.Items
}
