package install

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/capxp/cluster-api-provider-crossplane/internal/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	"github.com/capxp/cluster-api-provider-crossplane/packages"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// TestCrossplanePackages installs CAPXP as a platform does with Crossplane's
// package manager: `make release`'s packages and every package they depend
// on served by an OCI registry on loopback (TLS, its CA trusted by
// Crossplane), the release's crossplane-setup.yaml applied, and one
// `crossplane xpkg install configuration` bringing the XRDs, Compositions,
// functions, providers and the bridge, which then provisions a cluster.
func TestCrossplanePackages(t *testing.T) {
	ctx, dir := begin(t, "packages", 15*time.Minute)
	cli, err := tools.Dir(envtest.ToolsDir()).Binary("crossplane-cli", plane.CrossplaneCLIVersion)
	if err != nil {
		t.Fatal(err)
	}
	// The release, as `make release` writes it: the Provider package embeds
	// an image of this static binary, which the bridge then runs as.
	bin := filepath.Join(dir, "bin", "capxp")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/capxp")
	build.Dir = envtest.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cannot build capxp: %v\n%s", err, out)
	}
	rel := filepath.Join(dir, "release")
	if err := os.MkdirAll(rel, 0o750); err != nil {
		t.Fatal(err)
	}
	lines, err := release.Write(ctx, rel, release.Options{}, bin, runtime.GOARCH, cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("release:\n%s", strings.Join(lines, "\n"))

	crossplane := func(kubeconfig string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, cli, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HOME="+dir, "XDG_CONFIG_HOME="+dir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		t.Logf("crossplane %s:\n%s", strings.Join(args, " "), out.String())
		return out.String(), err
	}
	p := startPlane(ctx, t, dir, plane.Options{
		Release:         rel,
		ManagerBinary:   bin,
		AuditManagement: true,
		InstallConfiguration: func(_ context.Context, kubeconfig, ref string) error {
			_, err := crossplane(kubeconfig, "xpkg", "install", "configuration", ref, "capxp")
			return err
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
	for _, pr := range pl.Items {
		if strings.Contains(pr.Spec.Package, release.ProviderPackageName) {
			if h := pr.GetCondition(pkgv1.TypeHealthy); h.Status != corev1.ConditionTrue {
				t.Errorf("the bridge's Provider %s is not healthy: %s", pr.Name, h.Message)
			}
			if !strings.HasPrefix(pr.Status.ResolvedPackage, p.Registry().Host+"/") {
				t.Errorf("the bridge's package resolved to %q, want the plane's registry %s", pr.Status.ResolvedPackage, p.Registry().Host)
			}
		}
	}

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
	out, err := crossplane(p.Kubeconfig(), "resource", "trace", "crossplanecluster.infrastructure.cluster.x-k8s.io", plane.ExampleCluster, "-n", plane.ExampleNamespace)
	if err != nil {
		t.Fatalf("crossplane resource trace: %v", err)
	}
	for _, want := range []string{"CrossplaneCluster/" + plane.ExampleCluster, "Object/"} {
		if !strings.Contains(out, want) {
			t.Errorf("crossplane resource trace shows no %q", want)
		}
	}
	attackAsTenant(ctx, t, p)
	scrapeMetrics(ctx, t, p)
}

func containsPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
