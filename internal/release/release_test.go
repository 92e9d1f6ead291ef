package release

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func decode(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("cannot decode: %v", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func TestOptions(t *testing.T) {
	cases := map[string]struct {
		o       Options
		wantErr string
		image   string
	}{
		"Defaults":      {o: Options{Version: "v1.2.3"}, image: DefaultImageRepository + ":v1.2.3"},
		"Prerelease":    {o: Options{Version: "v1.2.3-rc.1", ImageRepository: "registry.example/capxp"}, image: "registry.example/capxp:v1.2.3-rc.1"},
		"NotSemver":     {o: Options{Version: "1.2.3"}, wantErr: "not a semantic version"},
		"ShortVersion":  {o: Options{Version: "v1.2"}, wantErr: "not a semantic version"},
		"TaggedImage":   {o: Options{Version: "v1.2.3", ImageRepository: "registry.example/capxp:latest"}, wantErr: "must not carry a tag"},
		"RegistryPort":  {o: Options{Version: "v1.2.3", ImageRepository: "127.0.0.1:5000/capxp"}, image: "127.0.0.1:5000/capxp:v1.2.3"},
		"DigestedImage": {o: Options{Version: "v1.2.3", ImageRepository: "registry.example/capxp@sha256:00"}, wantErr: "must not carry a tag"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := tc.o.withDefaults()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("withDefaults() error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.o.Image(); got != tc.image {
				t.Errorf("Image() = %q, want %q", got, tc.image)
			}
		})
	}
}

func TestMetadata(t *testing.T) {
	cases := map[string]struct {
		version string
		wantErr bool
	}{
		"ListedSeries":   {version: "v0.1.7"},
		"UnlistedSeries": {version: "v0.9.0", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Metadata(Options{Version: tc.version})
			if (err != nil) != tc.wantErr {
				t.Errorf("Metadata(%s) error = %v, want error %t", tc.version, err, tc.wantErr)
			}
		})
	}
}

// TestComponents checks what clusterctl and a cluster need of the
// components: every namespaced object in the provider's namespace, every
// object labelled for clusterctl, the release's image, and a Deployment
// that runs as an unprivileged user with the webhook's certificate mounted.
func TestComponents(t *testing.T) {
	b, err := Components(Options{Version: "v0.1.0", ImageRepository: "registry.example/capxp-manager"})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	var dep *appsv1.Deployment
	for _, u := range decode(t, b) {
		kinds[u.GetKind()]++
		if u.GetLabels()["cluster.x-k8s.io/provider"] != Provider {
			t.Errorf("%s %s lacks the provider label", u.GetKind(), u.GetName())
		}
		switch u.GetKind() {
		case "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Namespace":
			if u.GetNamespace() != "" {
				t.Errorf("cluster-scoped %s %s has namespace %q", u.GetKind(), u.GetName(), u.GetNamespace())
			}
		default:
			if u.GetNamespace() != "capxp-system" {
				t.Errorf("%s %s is in namespace %q, not capxp-system", u.GetKind(), u.GetName(), u.GetNamespace())
			}
		}
		if u.GetKind() == "Deployment" {
			j, _ := u.MarshalJSON()
			dep = &appsv1.Deployment{}
			if err := yaml.Unmarshal(j, dep); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string]int{"CustomResourceDefinition": 6, "ClusterRole": 8, "ClusterRoleBinding": 2, "Namespace": 1, "Deployment": 1,
		"ServiceAccount": 1, "Service": 2, "Issuer": 1, "Certificate": 1}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	if dep == nil {
		t.Fatal("no Deployment")
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if c.Image != "registry.example/capxp-manager:v0.1.0" {
		t.Errorf("image = %q", c.Image)
	}
	if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("container security context is not restricted: %+v", sc)
	}
	for _, flag := range []string{"--leader-elect", "--webhook-service=$(POD_NAMESPACE)/capxp-webhook-service",
		"--webhook-ca-injection-from=$(POD_NAMESPACE)/capxp-serving-cert", "--leader-election-namespace=$(POD_NAMESPACE)"} {
		if !contains(c.Args, flag) {
			t.Errorf("args %v lack %s", c.Args, flag)
		}
	}
	if c.LivenessProbe == nil || c.ReadinessProbe == nil || c.Resources.Requests.Cpu().IsZero() {
		t.Error("the container lacks probes or resource requests")
	}
}

func contains(s []string, v string) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}

func TestCrossplaneSetup(t *testing.T) {
	b, err := CrossplaneSetup(Options{Version: "v0.1.0", PackageRegistry: "127.0.0.1:5000/capxp/"})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range decode(t, b) {
		switch u.GetKind() {
		case "ClusterRoleBinding":
			subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
			if got := subjects[0].(map[string]any)["namespace"]; got != "crossplane-system" {
				t.Errorf("binding %s names namespace %v, not crossplane-system", u.GetName(), got)
			}
		case "ImageConfig":
			m, _, _ := unstructured.NestedSlice(u.Object, "spec", "matchImages")
			if got := m[0].(map[string]any)["prefix"]; got != "127.0.0.1:5000/capxp/"+ProviderPackageName {
				t.Errorf("ImageConfig prefix = %v", got)
			}
			if u.GetNamespace() != "" {
				t.Errorf("ImageConfig is cluster-scoped, has namespace %s", u.GetNamespace())
			}
		}
	}
}

func TestImage(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "capxp")
	if err := os.WriteFile(bin, []byte("#!binary"), 0o600); err != nil {
		t.Fatal(err)
	}
	img, err := Image(bin, "arm64")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	got := []string{cfg.OS, cfg.Architecture, cfg.Config.User, strings.Join(cfg.Config.Entrypoint, " "), strings.Join(cfg.Config.Cmd, " ")}
	if diff := cmp.Diff([]string{"linux", "arm64", ImageUser, ImageEntrypoint, "manager"}, got); diff != "" {
		t.Errorf("image configuration (-want +got):\n%s", diff)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v; want one", len(layers), err)
	}
	fn, err := FunctionImage(bin, "arm64")
	if err != nil {
		t.Fatal(err)
	}
	fcfg, err := fn.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(append(fcfg.Config.Entrypoint, fcfg.Config.Cmd...), " "); got != FunctionImageEntrypoint {
		t.Errorf("function image runs %q, want %q", got, FunctionImageEntrypoint)
	}
}

// TestCompositionsCallTheReleasesFunction: the Compositions Configuration
// depends on the release's Function package, and its Compositions call the Function by
// the name Crossplane gives it when installed from the release's registry.
func TestCompositionsCallTheReleasesFunction(t *testing.T) {
	cases := map[string]struct {
		registry string
		wantPkg  string
		wantName string
	}{
		"DefaultRegistry": {wantPkg: "ghcr.io/capxp/function-asg-instances", wantName: "capxp-function-asg-instances"},
		"OtherRegistry": {
			registry: "registry.example:5000/acme/platform",
			wantPkg:  "registry.example:5000/acme/platform/function-asg-instances",
			wantName: "acme-platform-function-asg-instances",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := WriteCompositionsRoot(dir, Options{Version: "v1.2.3", PackageRegistry: tc.registry}); err != nil {
				t.Fatal(err)
			}
			meta := decode(t, must(os.ReadFile(filepath.Join(dir, "crossplane.yaml"))))[0]
			deps, _, _ := unstructured.NestedSlice(meta.Object, "spec", "dependsOn")
			found := false
			for _, d := range deps {
				d := d.(map[string]any)
				found = found || (d["kind"] == "Function" && d["package"] == tc.wantPkg && d["version"] == "v1.2.3")
			}
			if !found {
				t.Errorf("the Configuration does not depend on Function %s v1.2.3: %v", tc.wantPkg, deps)
			}
			pool := decode(t, must(os.ReadFile(filepath.Join(dir, "aws", "machinepool.yaml"))))[0]
			steps, _, _ := unstructured.NestedSlice(pool.Object, "spec", "pipeline")
			calls := []string{}
			for _, s := range steps {
				n, _, _ := unstructured.NestedString(s.(map[string]any), "functionRef", "name")
				calls = append(calls, n)
			}
			if !slices.Contains(calls, tc.wantName) {
				t.Errorf("aws/machinepool.yaml calls %v, want %s among them", calls, tc.wantName)
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestCompositionsRoot: the Compositions Configuration's package root holds
// its metadata, the activation policy, and every XRD and Composition, each
// a package object; nothing else (the example XRs are not package objects),
// and it does not depend on the bridge.
func TestCompositionsRoot(t *testing.T) {
	dir := t.TempDir()
	if err := WriteCompositionsRoot(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	root := os.DirFS(dir)
	if err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		for _, o := range decode(t, raw) {
			kinds[o.GetKind()]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for k := range kinds {
		switch k {
		case "Configuration", "CompositeResourceDefinition", "Composition", "ManagedResourceActivationPolicy":
		default:
			t.Errorf("the package root holds a %s, which is not a package object", k)
		}
	}
	if kinds["Configuration"] != 1 || kinds["CompositeResourceDefinition"] == 0 || kinds["Composition"] == 0 {
		t.Errorf("package objects by kind: %v", kinds)
	}
	for _, d := range dependencies(t, dir) {
		if strings.HasSuffix(d, "/"+ProviderPackageName) {
			t.Errorf("the Compositions Configuration depends on the bridge (%s): beside clusterctl's, two would run", d)
		}
	}
}

// TestConfigurationRoot: the Configuration a platform installs with
// Crossplane's package manager is the Compositions Configuration and the
// bridge, at the release's version, and nothing else: a bridge and the
// Compositions each come from one package.
func TestConfigurationRoot(t *testing.T) {
	dir := t.TempDir()
	if err := WriteConfigurationRoot(dir, Options{Version: "v1.2.3"}); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "crossplane.yaml" {
		t.Errorf("the Configuration's root holds %v, want crossplane.yaml alone", entries)
	}
	got := dependencies(t, dir)
	want := []string{"Configuration ghcr.io/capxp/" + CompositionsPackageName + " v1.2.3", "Provider ghcr.io/capxp/" + ProviderPackageName + " v1.2.3"}
	if !slices.Equal(got, want) {
		t.Errorf("the Configuration depends on %v, want %v", got, want)
	}
}

// dependencies lists a package root's dependencies as "kind package version".
func dependencies(t *testing.T, root string) []string {
	t.Helper()
	meta := decode(t, must(os.ReadFile(filepath.Join(root, "crossplane.yaml"))))[0]
	deps, _, _ := unstructured.NestedSlice(meta.Object, "spec", "dependsOn")
	var out []string
	for _, d := range deps {
		d := d.(map[string]any)
		out = append(out, fmt.Sprintf("%v %v %v", d["kind"], d["package"], d["version"]))
	}
	return out
}

func TestMonitoring(t *testing.T) {
	dir, err := WriteMonitoring(filepath.Join(t.TempDir(), MonitoringDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"alerts.yaml", "dashboard.json", "servicemonitor.yaml"} {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("the release has no %s: %v", f, err)
		}
		want, err := os.ReadFile(filepath.Join("..", "..", "config", "monitoring", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s in the release differs from config/monitoring/%s", f, f)
		}
		if len(decode(t, got)) != 1 {
			t.Errorf("%s is not one object", f)
		}
	}
}

// TestPrometheusFindsTheManager: on each install path, the shipped
// ServiceMonitor selects the shipped metrics Service, whose selector
// matches the manager's pods and whose target port is the port the manager
// serves its diagnostics on, in the namespace the manager runs in.
func TestPrometheusFindsTheManager(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "monitoring", "servicemonitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sm struct {
		Spec struct {
			Selector  metav1.LabelSelector `json:"selector"`
			Endpoints []struct {
				Port   string `json:"port"`
				Scheme string `json:"scheme"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &sm); err != nil {
		t.Fatal(err)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Scheme != "https" {
		t.Fatalf("the ServiceMonitor's endpoints are %+v, want one, over https", sm.Spec.Endpoints)
	}
	smSelector, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Version: "v0.1.0", ImageRepository: "registry.example/capxp-manager", PackageRegistry: "registry.example/capxp/"}
	// pod is what each path runs the manager with: its pod's labels and
	// its container's ports and arguments.
	type pod struct {
		namespace string
		labels    map[string]string
		container corev1.Container
	}
	cases := map[string]struct {
		manifests func(Options) ([]byte, error)
		pod       func(t *testing.T, objs []*unstructured.Unstructured) pod
	}{
		"clusterctl": {
			manifests: Components,
			pod: func(t *testing.T, objs []*unstructured.Unstructured) pod {
				t.Helper()
				for _, u := range objs {
					if u.GetKind() == "Deployment" {
						d := &appsv1.Deployment{}
						if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
							t.Fatal(err)
						}
						return pod{namespace: d.Namespace, labels: d.Spec.Template.Labels, container: d.Spec.Template.Spec.Containers[0]}
					}
				}
				t.Fatal("no Deployment")
				return pod{}
			},
		},
		"Crossplane packages": {
			manifests: CrossplaneSetup,
			pod: func(t *testing.T, objs []*unstructured.Unstructured) pod {
				t.Helper()
				for _, u := range objs {
					if u.GetKind() != "DeploymentRuntimeConfig" {
						continue
					}
					tmpl, _, _ := unstructured.NestedMap(u.Object, "spec", "deploymentTemplate", "spec", "template")
					pt := &corev1.PodTemplateSpec{}
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, pt); err != nil {
						t.Fatal(err)
					}
					for _, c := range pt.Spec.Containers {
						// Crossplane's runtime runs the package in this container.
						if c.Name == "package-runtime" {
							return pod{namespace: "crossplane-system", labels: pt.Labels, container: c}
						}
					}
				}
				t.Fatal("no DeploymentRuntimeConfig with a package-runtime container")
				return pod{}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := tc.manifests(o)
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, b)
			p := tc.pod(t, objs)
			// The manager serves its diagnostics where --diagnostics-address
			// says (by default, with clusterctl), CAPI's default :8443 when it
			// says nothing.
			diagnostics := int32(8443)
			for _, a := range p.container.Args {
				if v, ok := strings.CutPrefix(a, "--diagnostics-address="); ok {
					// A clusterctl variable's default, ${VAR:=:8443}, or an address.
					port := strings.TrimSuffix(v[strings.LastIndex(v, ":")+1:], "}")
					n, err := strconv.ParseInt(port, 10, 32)
					if err != nil {
						t.Fatalf("--diagnostics-address=%s names no port", v)
					}
					diagnostics = int32(n)
				}
			}
			var svcs []*corev1.Service
			for _, u := range objs {
				if u.GetKind() != "Service" || !smSelector.Matches(labels.Set(u.GetLabels())) {
					continue
				}
				s := &corev1.Service{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s); err != nil {
					t.Fatal(err)
				}
				svcs = append(svcs, s)
			}
			if len(svcs) != 1 {
				t.Fatalf("the ServiceMonitor selects %d Services, want 1", len(svcs))
			}
			s := svcs[0]
			if s.Namespace != p.namespace {
				t.Errorf("Service %s is in %q, the manager in %q", s.Name, s.Namespace, p.namespace)
			}
			if !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.labels)) {
				t.Errorf("Service %s selects %v, the manager's pods are labelled %v", s.Name, s.Spec.Selector, p.labels)
			}
			var target *intstr.IntOrString
			for _, sp := range s.Spec.Ports {
				if sp.Name == sm.Spec.Endpoints[0].Port {
					target = &sp.TargetPort
				}
			}
			if target == nil {
				t.Fatalf("Service %s has no port %q, which the ServiceMonitor scrapes", s.Name, sm.Spec.Endpoints[0].Port)
			}
			served := false
			for _, cp := range p.container.Ports {
				if (target.Type == intstr.String && cp.Name == target.StrVal) || (target.Type == intstr.Int && cp.ContainerPort == target.IntVal) {
					served = cp.ContainerPort == diagnostics
				}
			}
			if !served {
				t.Errorf("Service %s's target port %s is not the container's port %d, where the manager serves its diagnostics: %+v", s.Name, target.String(), diagnostics, p.container.Ports)
			}
		})
	}
}
