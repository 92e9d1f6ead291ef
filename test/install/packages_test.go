package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capxp/cluster-api-provider-crossplane/controllers/inplace"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/packages"
	ctlsetup "github.com/capxp/cluster-api-provider-crossplane/test/clusterctl"
)

// TestCrossplanePackages installs CAPXP as a platform does with Crossplane's
// package manager: `make release`'s packages and every package they depend
// on served by an OCI registry on loopback (TLS, its CA trusted by
// Crossplane), the release's crossplane-setup.yaml applied, and one
// `crossplane xpkg install configuration` bringing the XRDs, Compositions,
// functions, providers and the bridge, which then provisions a cluster.
func TestCrossplanePackages(t *testing.T) {
	ctx, dir := begin(t, "packages", 15*time.Minute)
	bin, rel, crossplane := ctlsetup.PackagedRelease(ctx, t, dir)
	// docs/install.md's package path, as written, in the folder a platform
	// engineer works in: the release as out/, clusterctl's configuration
	// where clusterctl looks by default (CAPI's providers from local
	// files: they run in the plane's process).
	work := filepath.Join(dir, "work")
	ctlsetup.InstallRelease(ctx, t, filepath.Join(work, ".cluster-api"), rel)
	if err := os.Symlink(rel, filepath.Join(work, "out")); err != nil {
		t.Fatal(err)
	}
	version, err := release.VersionOf(rel)
	if err != nil {
		t.Fatal(err)
	}
	p := startPlane(ctx, t, dir, plane.Options{
		Release:         rel,
		ManagerBinary:   bin,
		AuditManagement: true,
		// CAPI's own binaries, with its RuntimeSDK gate: they discover
		// the in-place update extension the bridge registers.
		InPlaceUpdates: true,
		InstallConfiguration: func(ctx context.Context, in plane.PackageInstall) (string, error) {
			runDocWith(ctx, t, in.Kubeconfig, "docs/install.md", "packages-install", work,
				append(registryEnv(in.Registry), "CLUSTERCTL_DISABLE_VERSIONCHECK=true")...)
			return docRegistry(in.Registry) + "/" + release.ConfigurationPackageName + ":" + version, nil
		},
	})
	c := p.Management().Client

	// Every dependency installed, from the plane's registry; those that run
	// here healthy (plane.Start waited for both).
	installed, err := p.Packages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("packages:\n%s", strings.Join(installed, "\n"))
	deps, err := packages.Dependencies("")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps {
		if !containsPrefix(installed, d.Package+":"+d.Version+" Installed=True") {
			t.Errorf("dependency %s %s is not installed", d.Package, d.Version)
		}
	}
	pl := &pkgv1.ProviderList{}
	if err := c.List(ctx, pl); err != nil {
		t.Fatal(err)
	}
	bridge := ""
	for _, pr := range pl.Items {
		if strings.Contains(pr.Spec.Package, release.ProviderPackageName) {
			bridge = pr.Name
			if h := pr.GetCondition(pkgv1.TypeHealthy); h.Status != corev1.ConditionTrue {
				t.Errorf("the bridge's Provider %s is not healthy: %s", pr.Name, h.Message)
			}
			if !strings.HasPrefix(pr.Status.ResolvedPackage, p.Registry().Host+"/") {
				t.Errorf("the bridge's package resolved to %q, want the plane's registry %s", pr.Status.ResolvedPackage, p.Registry().Host)
			}
		}
	}

	// The bridge serves its webhook server on the Service Crossplane gives
	// its Provider: the credentials webhook and the in-place update
	// extension are registered where that Service's webhook port reaches.
	extensionRegistered(ctx, t, c, "crossplane-system")
	addr, err := p.ServiceAddress(ctx, "crossplane-system", bridge, "webhook")
	if err != nil {
		t.Fatalf("the bridge's Provider Service: %v", err)
	}
	ec := &runtimev1.ExtensionConfig{}
	if err := c.Get(ctx, client.ObjectKey{Name: inplace.ExtensionConfigName}, ec); err != nil {
		t.Fatal(err)
	}
	if got, want := ec.Spec.ClientConfig.URL, "https://"+addr; got != want {
		t.Errorf("the ExtensionConfig names %q, where the Service %s's webhook port reaches %q", got, bridge, want)
	}
	// CAPI calls it: its discovery lists the three in-place hooks.
	eventually(t, "CAPI discovers the bridge's in-place update hooks", time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: inplace.ExtensionConfigName}, ec); err != nil {
			return err
		}
		if c := conditions.Get(ec, runtimev1.ExtensionConfigDiscoveredCondition); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("%s: %v", runtimev1.ExtensionConfigDiscoveredCondition, c)
		}
		var hooks []string
		for _, h := range ec.Status.Handlers {
			hooks = append(hooks, h.RequestHook.Hook)
		}
		slices.Sort(hooks)
		if want := []string{"CanUpdateMachine", "CanUpdateMachineSet", "UpdateMachine"}; !slices.Equal(hooks, want) {
			return fmt.Errorf("CAPI discovered the hooks %v, want %v", hooks, want)
		}
		return nil
	})

	// The bridge adapts what the packages brought: the local example
	// provisions.
	if err := p.ApplyExample(ctx); err != nil {
		t.Fatal(err)
	}
	last := ""
	if err := p.WaitForExample(ctx, plane.ExampleMachines, 3*time.Minute, func(s plane.Status) {
		if now := strings.Join(s.Lines, "\n"); now != last {
			last = now
			t.Logf("example:\n%s", now)
		}
	}); err != nil {
		t.Fatal(err)
	}
	runDoc(ctx, t, p, "docs/install.md", "packages-trace", work, "CLUSTER="+plane.ExampleCluster, "NAMESPACE="+plane.ExampleNamespace)
	out, err := crossplane(p.Kubeconfig(), "resource", "trace", "crossplanecluster.infrastructure.cluster.x-k8s.io", plane.ExampleCluster, "-n", plane.ExampleNamespace)
	if err != nil {
		t.Fatalf("crossplane resource trace: %v", err)
	}
	for _, want := range []string{"CrossplaneCluster/" + plane.ExampleCluster, "Object/"} {
		if !strings.Contains(out, want) {
			t.Errorf("crossplane resource trace shows no %q", want)
		}
	}
	oneBridge(t, p)
	attackAsTenant(ctx, t, p)
	scrapeMetrics(ctx, t, p)
	onboardATeam(ctx, t, p)
}

// oneBridge fails the test unless exactly one CAPXP bridge runs: two
// would each hold, release and write what the other does.
func oneBridge(t *testing.T, p *plane.Plane) {
	t.Helper()
	if b := p.Bridges(); len(b) != 1 {
		t.Errorf("%d bridges run, want exactly one: %v", len(b), b)
	}
}

func containsPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
