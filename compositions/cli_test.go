package compositions_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/compcheck"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/packages"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// crossplaneCLIVersion is the crossplane CLI hack/ensure-tools.sh builds.
const crossplaneCLIVersion = "v2.5.0"

// TestCrossplaneCLI renders every shipped Composition as a composition
// author does, with `crossplane composition render --crossplane-binary` (the
// real engine, the real functions through the CLI's Development runtime),
// and validates the output, the XR and every composed resource, with
// `crossplane resource validate` against CAPXP's XRDs and the CRDs of the
// providers at the versions the Configuration pins.
func TestCrossplaneCLI(t *testing.T) {
	cli := envtest.Tool("crossplane-cli", crossplaneCLIVersion)
	if _, err := os.Stat(cli); err != nil {
		t.Fatalf("the crossplane CLI is missing: run `hack/ensure-tools.sh crossplane-cli`: %v", err)
	}
	xp, err := envtest.Required(envtest.CrossplaneModule)
	if err != nil {
		t.Fatal(err)
	}
	crossplane := envtest.Tool("crossplane", xp.Version)
	dir := t.TempDir()

	// The functions, already running for the engine, through the CLI's
	// Development runtime.
	deps, err := packages.Dependencies("Function")
	if err != nil {
		t.Fatal(err)
	}
	targets := engine.Targets()
	var fns bytes.Buffer
	for _, d := range deps {
		fmt.Fprintf(&fns, "---\napiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: %s\n  annotations:\n"+
			"    render.crossplane.io/runtime: Development\n    render.crossplane.io/runtime-development-target: %q\n"+
			"spec:\n  package: %s:%s\n", d.FunctionName(), targets[d.FunctionName()], d.Package, d.Version)
	}
	// CAPXP's own, which the release adds.
	fmt.Fprintf(&fns, "---\napiVersion: pkg.crossplane.io/v1\nkind: Function\nmetadata:\n  name: %s\n  annotations:\n"+
		"    render.crossplane.io/runtime: Development\n    render.crossplane.io/runtime-development-target: %q\n"+
		"spec:\n  package: %s:%s\n", release.DefaultFunctionName, targets[release.DefaultFunctionName], release.Options{}.FunctionPackage(), capxp.Version())
	functions := write(t, dir, "functions.yaml", fns.Bytes())

	// The schemas: CAPXP's XRDs and the composed kinds' provider CRDs.
	schemas := filepath.Join(dir, "schemas")
	crds, err := providerCRDs()
	if err != nil {
		t.Fatal(err)
	}
	xrds, err := filepath.Glob(filepath.Join("xrds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(crds, xrds...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		write(t, schemas, filepath.Base(f), b)
	}

	// Crossplane's own schemas, which validate reads from the Crossplane
	// image it is given: placed in its cache as it would store them, from
	// the CRDs of the Crossplane the plane runs (nothing is downloaded).
	cache := filepath.Join(dir, "cache")
	image := "xpkg.crossplane.io/crossplane/crossplane:" + xp.Version
	core, err := filepath.Glob(filepath.Join(envtest.ToolsDir(), "crds", "crossplane-"+xp.Version, "*.yaml"))
	if err != nil || len(core) == 0 {
		t.Fatalf("Crossplane's CRDs are missing: run `hack/ensure-tools.sh crds` (%v)", err)
	}
	for _, f := range core {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(cache, strings.ReplaceAll(image, ":", "@")), filepath.Base(f), b)
	}

	for name, tc := range contractCases() {
		t.Run(name, func(t *testing.T) {
			xr := testdata(t, tc.xr)
			secret, err := yaml.Marshal(compcheck.BootstrapSecret(xr).Object)
			if err != nil {
				t.Fatal(err)
			}
			required := write(t, t.TempDir(), "bootstrap-secret.yaml", secret)
			out, err := runCLI(t, cli, "composition", "render", filepath.Join("examples", tc.xr), tc.composition, functions,
				"--crossplane-binary="+crossplane, "--xrd="+filepath.Join("xrds", strings.ToLower(xr.GetKind())+"s.yaml"),
				"--required-resources="+required, "--include-full-xr")
			if err != nil {
				t.Fatalf("crossplane composition render: %v\n%s", err, out)
			}
			if !strings.Contains(out, "kind: "+xr.GetKind()) {
				t.Fatalf("crossplane composition render printed no %s:\n%s", xr.GetKind(), out)
			}
			rendered := write(t, t.TempDir(), "rendered.yaml", []byte(out))
			report, err := runCLI(t, cli, "resource", "validate", schemas, rendered, "--cache-dir="+cache, "--crossplane-image="+image, "--error-on-missing-schemas")
			if err != nil {
				t.Fatalf("crossplane resource validate: %v\n%s", err, report)
			}
			t.Logf("crossplane resource validate:\n%s", report)
			if !strings.Contains(report, "0 failure cases") {
				t.Errorf("crossplane resource validate found failures:\n%s", report)
			}
			// Every rendered object: the XR and what it composes.
			docs := strings.Count("\n"+out, "\napiVersion: ")
			if n := strings.Count(report, "validated successfully"); n != docs || n == 0 {
				t.Errorf("crossplane resource validate validated %d resources, want the %d rendered", n, docs)
			}
		})
	}
}

// runCLI runs a command and returns its combined output.
func runCLI(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// write writes a file into dir, creating it.
func write(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
