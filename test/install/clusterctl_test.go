// Package install installs CAPXP the way platform teams do, with the real
// clients, on the real local plane: clusterctl from the release's provider
// files, the manager run as the installed Deployment (its ServiceAccount,
// flags and environment).
package install

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/inplace"
	"github.com/capxp/cluster-api-provider-crossplane/dev/lifeline"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	ctlsetup "github.com/capxp/cluster-api-provider-crossplane/test/clusterctl"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
	"github.com/capxp/cluster-api-provider-crossplane/test/wait"
)

func TestMain(m *testing.M) {
	lifeline.Main()
	os.Exit(m.Run())
}

func TestClusterctl(t *testing.T) {
	ctx, dir := begin(t, "install", 15*time.Minute)
	// dir is where the platform engineer works: clusterctl.yaml, the
	// release as out/, the workload cluster's kubeconfig.
	clusterctl, _ := ctlsetup.Install(ctx, t, dir)
	pkgBin, rel, _ := ctlsetup.PackagedRelease(ctx, t, dir)
	if err := os.Symlink(rel, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	version, err := release.VersionOf(rel)
	if err != nil {
		t.Fatal(err)
	}
	docEnv := ctlsetup.Env(dir)
	// docs/install.md's clusterctl path, as written: the Compositions
	// Configuration pushed to the registry and installed (with the
	// providers and functions it depends on), then clusterctl init.
	p := startPlane(ctx, t, dir, plane.Options{
		Clusterctl: true, Release: rel, ManagerBinary: pkgBin, AuditManagement: true,
		InstallConfiguration: func(ctx context.Context, in plane.PackageInstall) (string, error) {
			env := append(registryEnv(in.Registry), docEnv...)
			runDocWith(ctx, t, in.Kubeconfig, "docs/install.md", "clusterctl-compositions", dir, env...)
			return docRegistry(in.Registry) + "/" + release.CompositionsPackageName + ":" + version, nil
		},
	})
	c := p.Management().Client
	if err := os.WriteFile(filepath.Join(dir, "workload.kubeconfig"), p.Workload.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) string { t.Helper(); return clusterctl(p, args...) }
	// The manager image pushed as the page says; the plane's nodes pull it
	// from there.
	runDoc(ctx, t, p, "docs/install.md", "image", dir, registryEnv(p.Registry())...)
	kubelet := runWhenRolled(ctx, p, version, "")
	runDoc(ctx, t, p, "docs/install.md", "clusterctl-init", dir, docEnv...)
	if err := <-kubelet; err != nil {
		t.Fatal(err)
	}
	oneBridge(t, p)
	extensionRegistered(ctx, t, c, "capxp-system")
	// Prometheus finds the manager through the shipped ServiceMonitor and
	// metrics Service in clusterctl's namespace.
	refusesAnonymousScrapes(ctx, t, metricsThroughServiceMonitor(ctx, t, p, "capxp-system"))

	const ns, name = "team-a", "alpha"
	runDoc(ctx, t, p, "docs/install.md", "clusterctl-cluster", dir, docEnv...)
	waitProvisioned(ctx, t, c, ns, name, 3)
	runDoc(ctx, t, p, "docs/install.md", "clusterctl-describe", dir, docEnv...)
	provisionManaged(ctx, t, p, clusterctl, "team-b", "bravo")
	generateTopology(t, run, ns)
	generateAWSManaged(ctx, t, c, run, ns)
	attackAsTenant(ctx, t, p)

	out := run("describe", "cluster", name, "-n", ns, "--show-conditions", "all")
	for _, want := range []string{"CrossplaneCluster " + ns + "/" + name, "Synced", "Responsive", "WatchCircuitClosed"} {
		if !strings.Contains(out, want) {
			t.Errorf("clusterctl describe does not show %q", want)
		}
	}

	// Delete the clusters, then the provider; nothing of CAPXP stays.
	for _, key := range []client.ObjectKey{{Namespace: ns, Name: name}, {Namespace: "team-b", Name: "bravo"}} {
		if err := c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the clusters are gone", 3*time.Minute, func() error {
		for _, key := range []client.ObjectKey{{Namespace: ns, Name: name}, {Namespace: "team-b", Name: "bravo"}} {
			if err := c.Get(ctx, key, &clusterv1.Cluster{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s still there: %v", key, err)
			}
		}
		return nil
	})
	runDoc(ctx, t, p, "docs/install.md", "clusterctl-delete", dir, docEnv...)
	p.StopDeployment()
	eventually(t, "nothing labelled for infrastructure-crossplane stays", 2*time.Minute, func() error {
		return leftovers(ctx, c)
	})
	eventually(t, "the namespaces' credential records and their CRD go", 2*time.Minute, func() error {
		crd := &metav1.PartialObjectMetadata{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		err := c.Get(ctx, client.ObjectKey{Name: "namespacecredentials.infrastructure.cluster.x-k8s.io"}, crd)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("CRD %s is still there (deleting: %t)", crd.GetName(), !crd.GetDeletionTimestamp().IsZero())
	})
}

// generateTopology generates a cluster of each topology flavor as a platform
// team would, and finds in each the Cluster of the class and the class
// itself, which clusterctl includes from the release's
// clusterclass-<class>.yaml when the management cluster lacks it.
func generateTopology(t *testing.T, run func(...string) string, ns string) {
	t.Helper()
	t.Setenv("CONTROL_PLANE_ENDPOINT_HOST", "api.example.org")
	want := map[string]map[string]int{
		"local": {"ClusterClass": 1, "Cluster": 1, "CrossplaneClusterTemplate": 1, "CrossplaneMachineTemplate": 2, "KubeadmControlPlaneTemplate": 1, "KubeadmConfigTemplate": 1},
		"byo":   {"ClusterClass": 1, "Cluster": 1, "CrossplaneClusterTemplate": 1, "CrossplaneMachineTemplate": 2, "KubeadmControlPlaneTemplate": 1, "KubeadmConfigTemplate": 1},
		"managed": {"ClusterClass": 1, "Cluster": 1, "CrossplaneClusterTemplate": 1, "CrossplaneControlPlaneTemplate": 1,
			"CrossplaneMachineTemplate": 1, "CrossplaneMachinePoolTemplate": 1, "KubeadmConfigTemplate": 1},
	}
	for flavor, want := range want {
		class := "crossplane-" + flavor
		out := run("generate", "cluster", "classy-"+flavor, "--flavor", "topology-"+flavor, "--infrastructure", "crossplane", "-n", ns)
		kinds := map[string]int{}
		var classRef string
		for _, u := range decodeAll(out) {
			kinds[u.GetKind()]++
			if u.GetNamespace() != ns {
				t.Errorf("flavor topology-%s: %s %s in namespace %q, want %s", flavor, u.GetKind(), u.GetName(), u.GetNamespace(), ns)
			}
			switch u.GetKind() {
			case "ClusterClass":
				if u.GetName() != class {
					t.Errorf("flavor topology-%s: ClusterClass %s, want %s", flavor, u.GetName(), class)
				}
			case "Cluster":
				classRef, _, _ = unstructured.NestedString(u.Object, "spec", "topology", "classRef", "name")
			}
		}
		for k, n := range want {
			if kinds[k] < n {
				t.Errorf("flavor topology-%s: %d %s, want %d (all: %v)", flavor, kinds[k], k, n, kinds)
			}
		}
		if classRef != class {
			t.Errorf("flavor topology-%s: the Cluster's class is %q, want %s", flavor, classRef, class)
		}
	}
}

// generateAWSManaged generates a cluster of the aws-managed flavor (EKS
// and an EKS managed node group) as a platform team would, and has the
// plane's API server validate every object against the installed CRDs and
// XRDs (a server-side dry run: there is no AWS here). Its MachinePool needs
// no bootstrap data, and its XRs select shipped Compositions.
func generateAWSManaged(ctx context.Context, t *testing.T, c client.Client, run func(...string) string, ns string) {
	t.Helper()
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_PROVIDER_CONFIG", "team-a-aws")
	objs := decodeAll(run("generate", "cluster", "eks", "--flavor", "aws-managed", "--infrastructure", "crossplane",
		"-n", ns, "--kubernetes-version", "v1.36.0"))
	selected := map[string]string{}
	for _, u := range objs {
		if err := c.Create(ctx, u.DeepCopy(), client.DryRunAll); err != nil {
			t.Errorf("flavor aws-managed: %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		if b, found, _ := unstructured.NestedString(u.Object, "spec", "crossplane", "compositionSelector", "matchLabels", compositions.LabelBackend); found {
			selected[u.GetKind()] = b
		}
		if u.GetKind() == "MachinePool" {
			if name, found, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "bootstrap", "dataSecretName"); !found || name != "" {
				t.Errorf("flavor aws-managed: MachinePool %s: dataSecretName %q (set: %t), want \"\": EKS bootstraps its nodes", u.GetName(), name, found)
			}
		}
	}
	want := map[string]string{"CrossplaneCluster": "aws", "CrossplaneControlPlane": "aws", "CrossplaneMachinePool": "aws-eks"}
	if !maps.Equal(selected, want) {
		t.Errorf("flavor aws-managed: the XRs select the backends %v, want %v", selected, want)
	}
}

// provisionLocal creates a cluster of the release's local flavor with two
// workers on the plane, in namespace ns, as a platform team would with
// `clusterctl generate cluster`, and waits until the cluster and its 3
// machines are provisioned. It returns the objects it created.
func provisionLocal(ctx context.Context, t *testing.T, p *plane.Plane, clusterctl ctlsetup.Runner, ns, name string) []*unstructured.Unstructured {
	t.Helper()
	c := p.Management().Client
	// The workload cluster's kubeconfig, which the local flavor's
	// ProviderConfig and CAPI both read.
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-kubeconfig", Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type:       clusterv1.ClusterSecretType,
			Data:       map[string][]byte{"value": p.Workload.Kubeconfig},
		},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	manifest := clusterctl(p, "generate", "cluster", name, "--flavor", "local", "--infrastructure", "crossplane", "-n", ns, "--worker-machine-count", "2")
	objs := createAll(ctx, t, c, manifest)
	waitProvisioned(ctx, t, c, ns, name, 3)
	return objs
}

// waitProvisioned waits until a cluster's infrastructure and its machines
// are provisioned.
func waitProvisioned(ctx context.Context, t *testing.T, c client.Client, ns, name string, machines int) {
	t.Helper()
	eventually(t, fmt.Sprintf("the cluster and its %d machines are provisioned", machines), 3*time.Minute, func() error {
		cl := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl); err != nil {
			return err
		}
		if !ptrTrue(cl.Status.Initialization.InfrastructureProvisioned) {
			return fmt.Errorf("cluster infrastructure not provisioned")
		}
		ms := &clusterv1.MachineList{}
		if err := c.List(ctx, ms, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
			return err
		}
		n := 0
		for i := range ms.Items {
			if ptrTrue(ms.Items[i].Status.Initialization.InfrastructureProvisioned) {
				n++
			}
		}
		if n != machines {
			return fmt.Errorf("%d of %d machines provisioned", n, len(ms.Items))
		}
		return nil
	})
}

// createAll creates every object of a manifest, as `kubectl apply` would,
// and returns them.
func createAll(ctx context.Context, t *testing.T, c client.Client, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, u := range decodeAll(manifest) {
		objs = append(objs, u.DeepCopy())
		// The client discovers kinds lazily: a kind Crossplane has just
		// started serving can take a moment to be known, as with kubectl;
		// and the machine gate's MutatingAdmissionPolicy answers 503 until
		// the API server's type converters know the kind.
		eventually(t, "create "+u.GetKind()+" "+u.GetName(), 30*time.Second, func() error {
			err := c.Create(ctx, u)
			if err != nil && !apimeta.IsNoMatchError(err) && !apierrors.IsServiceUnavailable(err) {
				t.Fatalf("cannot create %s %s: %v", u.GetKind(), u.GetName(), err)
			}
			return err
		})
	}
	return objs
}

// provisionManaged creates a cluster of the release's managed flavor (a
// CrossplaneControlPlane, a MachineDeployment of two and a MachinePool of
// two) in namespace ns, as
// a platform team would, and waits until CAPI reports it Available: the
// installed manager, with the permissions clusterctl gave it, wrote the
// cluster's kubeconfig Secret, and CAPI reached the cluster with it.
func provisionManaged(ctx context.Context, t *testing.T, p *plane.Plane, clusterctl ctlsetup.Runner, ns, name string) {
	t.Helper()
	c := p.Management().Client
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workload-kubeconfig"}, Data: map[string][]byte{"kubeconfig": p.Workload.Kubeconfig}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	createAll(ctx, t, c, clusterctl(p, "generate", "cluster", name, "--flavor", "managed", "--infrastructure", "crossplane", "-n", ns))
	eventually(t, "the managed cluster is Available, through the kubeconfig the manager wrote", 3*time.Minute, func() error {
		cl := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl); err != nil {
			return err
		}
		if a := conditions.Get(cl, clusterv1.AvailableCondition); a == nil || a.Status != metav1.ConditionTrue {
			return fmt.Errorf("Available: %+v", a)
		}
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-kubeconfig"}, s); err != nil {
			return err
		}
		if !bytes.Equal(s.Data["value"], p.Workload.Kubeconfig) {
			return fmt.Errorf("Secret %s holds another kubeconfig", s.Name)
		}
		// CAPI's Cluster Available does not wait for MachinePools.
		mp := &clusterv1.MachinePool{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-mp-0"}, mp); err != nil {
			return err
		}
		if ready := ptr.Deref(mp.Status.ReadyReplicas, 0); ready != 2 || len(mp.Spec.ProviderIDList) != 2 {
			return fmt.Errorf("MachinePool %s: %d ready, provider IDs %v", mp.Name, ready, mp.Spec.ProviderIDList)
		}
		return nil
	})
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// extensionRegistered checks that the manager registered its in-place
// update hooks with CAPI where the API server reaches its credentials
// webhook: the same Service (CAPI injecting the CA from the certificate's
// Secret) or the same URL with the CA bundle (the plane runs the
// Deployment's pod on loopback).
func extensionRegistered(ctx context.Context, t *testing.T, c client.Client, ns string) {
	t.Helper()
	eventually(t, "the in-place update extension is registered beside the credentials webhook", time.Minute, func() error {
		vwc := &admissionv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: "capxp-credentials"}, vwc); err != nil {
			return err
		}
		if len(vwc.Webhooks) == 0 {
			return fmt.Errorf("the credentials webhook registration has no webhook")
		}
		want := vwc.Webhooks[0].ClientConfig
		ec := &runtimev1.ExtensionConfig{}
		if err := c.Get(ctx, client.ObjectKey{Name: inplace.ExtensionConfigName}, ec); err != nil {
			return err
		}
		got := ec.Spec.ClientConfig
		switch {
		case want.Service != nil:
			if got.Service.Name != want.Service.Name || got.Service.Namespace != ns || want.Service.Namespace != ns {
				return fmt.Errorf("the ExtensionConfig names the Service %s/%s, the credentials webhook %s/%s", got.Service.Namespace, got.Service.Name, want.Service.Namespace, want.Service.Name)
			}
			if got, want := ec.Annotations[runtimev1.InjectCAFromSecretAnnotation], ns+"/capxp-webhook-service-cert"; got != want {
				return fmt.Errorf("the ExtensionConfig has the CA injected from %q, want %q", got, want)
			}
		case want.URL != nil:
			if !strings.HasPrefix(*want.URL, got.URL) || got.URL == "" || len(got.CABundle) == 0 {
				return fmt.Errorf("the ExtensionConfig names %q (CA bundle of %d bytes), the credentials webhook %q", got.URL, len(got.CABundle), *want.URL)
			}
		default:
			return fmt.Errorf("the credentials webhook names neither a Service nor a URL")
		}
		return nil
	})
}

// leftovers lists what carries the provider's label, or its namespace.
func leftovers(ctx context.Context, c client.Client) error {
	var left []string
	sel := client.MatchingLabels{clusterv1.ProviderNameLabel: release.Provider}
	for _, gvk := range []string{"v1/Namespace", "apps/v1/Deployment", "v1/ServiceAccount", "v1/Service",
		"rbac.authorization.k8s.io/v1/ClusterRole", "rbac.authorization.k8s.io/v1/ClusterRoleBinding",
		"admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration",
		"admissionregistration.k8s.io/v1/MutatingAdmissionPolicy", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicyBinding",
		"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding",
		"cert-manager.io/v1/Certificate", "cert-manager.io/v1/Issuer",
		"runtime.cluster.x-k8s.io/v1beta2/ExtensionConfig"} {
		i := strings.LastIndex(gvk, "/")
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(gvk[:i])
		l.SetKind(gvk[i+1:] + "List")
		if err := c.List(ctx, l, sel); err != nil {
			return err
		}
		for _, o := range l.Items {
			left = append(left, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
		}
	}
	for _, crd := range []string{"crossplaneclustertemplates", "crossplanemachinetemplates", "crossplanemachinepooltemplates", "crossplanecontrolplanetemplates", "clusterproviderconfiggrants"} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apiextensions.k8s.io/v1")
		u.SetKind("CustomResourceDefinition")
		if err := c.Get(ctx, client.ObjectKey{Name: crd + ".infrastructure.cluster.x-k8s.io"}, u); err == nil {
			left = append(left, "CustomResourceDefinition "+u.GetName())
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left behind: %s", strings.Join(left, ", "))
	}
	return nil
}

// startPlane starts the local plane in dir/plane with the tools directory
// and the test's log, and stops it when the test ends, removing dir unless
// the test failed (its logs are kept then).
func startPlane(ctx context.Context, t *testing.T, dir string, o plane.Options) *plane.Plane {
	t.Helper()
	o.Dir = filepath.Join(dir, "plane")
	o.Tools = tools.Dir(envtest.ToolsDir())
	o.Progress = func(f string, a ...any) { t.Logf("plane: "+f, a...) }
	p, err := plane.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("the plane's logs are in %s", p.Dir())
			return
		}
		_ = os.RemoveAll(dir)
	})
	return p
}

// eventually polls every second, quietly: the install tests log what they
// run instead.
var eventually = wait.Options{Every: time.Second, Quiet: true}.Eventually

// decodeAll decodes every object of a YAML stream, as clusterctl prints one.
func decodeAll(manifest string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err != nil {
			return out
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// begin bounds an install test in time and gives it a folder for the
// release and the plane, kept when the test fails, for the plane's logs.
func begin(t *testing.T, name string, within time.Duration) (context.Context, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	t.Cleanup(cancel)
	dir, err := os.MkdirTemp("", "capxp-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	return ctx, dir
}
