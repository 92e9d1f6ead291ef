// Package clusterctl installs CAPXP on the local plane as platform teams do
// with clusterctl: from the release's provider files, the manager run as the
// installed Deployment (its ServiceAccount, flags and environment); and
// builds a release with its Crossplane packages for the paths that install
// them.
package clusterctl

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// Version is the clusterctl hack/ensure-tools.sh builds.
const Version = "v1.14.2"

// Runner runs clusterctl against a plane and returns what it printed; it
// fails the test when clusterctl fails.
type Runner func(p *plane.Plane, args ...string) string

// Install builds capxp and writes the release's clusterctl
// repository and configuration into dir; it returns a clusterctl runner for
// a plane (with that configuration, the plane's kubeconfig and dir as its
// home) and the capxp binary.
func Install(ctx context.Context, t testing.TB, dir string) (Runner, string) {
	t.Helper()
	clusterctl, err := tools.Dir(envtest.ToolsDir()).Binary("clusterctl", Version)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "capxp")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/capxp")
	build.Dir = envtest.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cannot build capxp: %v\n%s", err, out)
	}

	components, err := release.WriteClusterctl(filepath.Join(dir, "repository"), release.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return configure(ctx, t, dir, clusterctl, components), bin
}

// InstallRelease writes the clusterctl repository of a built release (a
// `make release` folder, the previous release's for an upgrade) and a
// clusterctl configuration that installs it into dir, and returns a
// clusterctl runner as Install does.
func InstallRelease(ctx context.Context, t testing.TB, dir, rel string) Runner {
	t.Helper()
	clusterctl, err := tools.Dir(envtest.ToolsDir()).Binary("clusterctl", Version)
	if err != nil {
		t.Fatal(err)
	}
	v := AddRelease(t, dir, rel)
	return configure(ctx, t, dir, clusterctl, filepath.Join(dir, "repository", release.Provider, v, release.ComponentsFile))
}

// AddRelease puts a built release's clusterctl files into the repository
// of dir, beside those there, as a platform adds a new release's before
// `clusterctl upgrade`; it returns the release's version.
func AddRelease(t testing.TB, dir, rel string) string {
	t.Helper()
	v, err := release.VersionOf(rel)
	if err != nil {
		t.Fatal(err)
	}
	from := filepath.Join(rel, release.ClusterctlFolder, release.Provider, v)
	to := filepath.Join(dir, "repository", release.Provider, v)
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatalf("cannot copy the clusterctl files of %s: %v", rel, err)
	}
	return v
}

// configure writes CAPI's metadata beside the provider's repository
// (clusterctl checks a provider's contract against CAPI's) and clusterctl's
// configuration naming components, and returns a clusterctl runner for a
// plane: that configuration, the plane's kubeconfig, dir its home.
func configure(ctx context.Context, t testing.TB, dir, clusterctl, components string) Runner {
	t.Helper()
	// CAPI's own providers, which the plane runs in its process and records
	// in clusterctl's inventory: clusterctl reads their metadata (upgrade
	// plan asks every provider of the inventory for its versions).
	capi, err := plane.CAPIProviders(filepath.Join(dir, "repository"))
	if err != nil {
		t.Fatal(err)
	}
	config := ConfigPath(dir)
	if err := os.WriteFile(config, release.ClusterctlConfig(components,
		capi,
		"cert-manager:\n  externallyProvisioned: \"true\""), 0o600); err != nil {
		t.Fatal(err)
	}

	return func(p *plane.Plane, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, clusterctl, append(args, "--config", config, "--kubeconfig", p.Kubeconfig())...) //nolint:gosec // the test's own arguments
		cmd.Env = append(os.Environ(), Env(dir)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("clusterctl %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		t.Logf("clusterctl %s:\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
		return stdout.String()
	}
}

// Env is the environment clusterctl runs with here: dir its home, and no
// check for a newer clusterctl (there is no network to ask).
func Env(dir string) []string {
	return []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "CLUSTERCTL_DISABLE_VERSIONCHECK=true"}
}

// ConfigPath is where Install writes clusterctl's configuration in dir.
func ConfigPath(dir string) string { return filepath.Join(dir, "clusterctl.yaml") }

// Init installs CAPXP on the plane with `clusterctl init` and runs
// its manager as the installed Deployment.
func Init(ctx context.Context, t testing.TB, p *plane.Plane, clusterctl Runner, bin string) {
	t.Helper()
	clusterctl(p, "init", "--infrastructure", "crossplane")
	if err := p.RunDeployment(ctx, "capxp-system", "capxp-controller-manager", bin); err != nil {
		t.Fatal(err)
	}
}

// ReleaseBinaries builds capxp and function-asg-instances as a release
// does (static, Linux) into dir/bin.
func ReleaseBinaries(ctx context.Context, t testing.TB, dir string) release.Binaries {
	t.Helper()
	// One go build for both: the linker runs once per binary, the
	// packages they share compile once.
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(dir, "bin")+string(filepath.Separator), "./cmd/capxp", "./cmd/function-asg-instances") //nolint:gosec // the go command, into the test's directory.
	build.Dir = envtest.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cannot build capxp and function-asg-instances: %v\n%s", err, out)
	}
	return release.Binaries{Manager: filepath.Join(dir, "bin", "capxp"), Function: filepath.Join(dir, "bin", "function-asg-instances")}
}

// PackagedRelease builds capxp as the packages' images run it (static,
// Linux) and `make release`'s output with its Crossplane packages into dir
// (with the options given: the registry and image repository it names;
// the defaults without), and returns the binary, the release and a runner
// of the crossplane CLI (CrossplaneCLI).
func PackagedRelease(ctx context.Context, t testing.TB, dir string, o ...release.Options) (string, string, func(kubeconfig string, args ...string) (string, error)) {
	t.Helper()
	crossplane, cli := CrossplaneCLI(ctx, t, dir)
	bins := ReleaseBinaries(ctx, t, dir)
	rel := filepath.Join(dir, "release")
	if err := os.MkdirAll(rel, 0o750); err != nil {
		t.Fatal(err)
	}
	opts := release.Options{}
	if len(o) > 0 {
		opts = o[0]
	}
	lines, err := release.Write(ctx, rel, opts, bins, runtime.GOARCH, cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("release:\n%s", strings.Join(lines, "\n"))
	return bins.Manager, rel, crossplane
}

// CrossplaneCLI returns a runner of the crossplane CLI against a
// kubeconfig (dir its home) that logs what it printed, and the CLI's path.
func CrossplaneCLI(ctx context.Context, t testing.TB, dir string) (func(kubeconfig string, args ...string) (string, error), string) {
	t.Helper()
	cli, err := tools.Dir(envtest.ToolsDir()).Binary("crossplane-cli", plane.CrossplaneCLIVersion)
	if err != nil {
		t.Fatal(err)
	}
	return func(kubeconfig string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, cli, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HOME="+dir, "XDG_CONFIG_HOME="+dir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		t.Logf("crossplane %s:\n%s", strings.Join(args, " "), out.String())
		return out.String(), err
	}, cli
}
