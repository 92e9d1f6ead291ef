package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	"github.com/capxp/cluster-api-provider-crossplane/packages"
)

func TestCompositionCheckCommand(t *testing.T) {
	// The test runs in cmd/capxp; the tools are the checkout's.
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	toolsDir := filepath.Join(root, ".cache", "tools")
	if d := os.Getenv(tools.EnvDir); d != "" {
		toolsDir = d
	}
	in := func(p string) string { return filepath.Join(root, p) }
	broken := filepath.Join(t.TempDir(), "broken.yaml")
	raw, err := os.ReadFile(in("compositions/local/machine.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The node's credentials patch removed: it keeps the template's.
	raw = bytes.Replace(raw, []byte("          fromFieldPath: spec.providerConfigRef.name\n          toFieldPath: spec.providerConfigRef.name\n"), []byte("          fromFieldPath: spec.providerConfigRef.name\n          toFieldPath: metadata.annotations[x]\n"), 1)
	if err := os.WriteFile(broken, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	withTools := "--tools-dir=" + toolsDir
	// CAPXP's own function, found on $PATH as the command finds it when
	// it is not beside capxp.
	fnDir := t.TempDir()
	build := exec.CommandContext(t.Context(), "go", "build", "-o", fnDir+string(filepath.Separator), "./cmd/function-asg-instances") //nolint:gosec // the go command, into a test directory.
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cannot build function-asg-instances: %v\n%s", err, out)
	}
	t.Setenv("PATH", fnDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	observed := t.TempDir()
	if err := os.WriteFile(filepath.Join(observed, "node.yaml"), []byte(`apiVersion: kubernetes.m.crossplane.io/v1alpha1
kind: Object
metadata:
  annotations:
    crossplane.io/composition-resource-name: node
status:
  conditions:
  - {type: Ready, status: "False", reason: Creating, lastTransitionTime: "2026-11-21T00:00:00Z"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	unknownFunction := filepath.Join(t.TempDir(), "functions.yaml")
	if err := os.WriteFile(unknownFunction, []byte(`apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: function-go-templating
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-go-templating:v0.11.0
`), 0o600); err != nil {
		t.Fatal(err)
	}
	// The author runs patch-and-transform on a TCP port, as with
	// crossplane render's Development runtime.
	developmentFunction := runFunction(t, toolsDir, "crossplane-contrib-function-patch-and-transform")
	cases := map[string]struct {
		reason string
		args   []string
		exit   int
		says   string
	}{
		"Holds": {
			reason: "a shipped Composition holds on every field",
			args:   []string{"check", in("compositions/aws/machine.yaml"), "--xr", in("compositions/examples/aws-machine-worker.yaml"), withTools},
			says:   "✓ valid for the providers' CRDs: 4 composed resource(s)",
		},
		"AWSPool": {
			reason: "the aws pool holds: CAPXP's own function, run by the command from its binary, lists the instances of the check's stand-in for Auto Scaling",
			args:   []string{"check", in("compositions/aws/machinepool.yaml"), withTools},
			says:   "✓ providerIDList: 3 machine(s)",
		},
		"AWSEKSPool": {
			reason: "the EKS node group pool holds: the function lists the instances of the Auto Scaling group the node group reports",
			args:   []string{"check", in("compositions/aws/machinepool-eks.yaml"), withTools},
			says:   "✓ providerIDList: 3 machine(s)",
		},
		"NoOwnFunction": {
			reason: "without function-asg-instances the command says how to get it",
			args:   []string{"check", in("compositions/aws/machinepool.yaml"), "--function-asg-instances=", withTools},
			exit:   2, says: "CAPXP's composition function function-asg-instances has no binary: build it (go build ./cmd/function-asg-instances",
		},
		"Broken": {
			reason: "a Composition that does not pass the credentials through fails on that field",
			args:   []string{"check", broken, "--xr", in("compositions/examples/local-machine.yaml"), withTools},
			exit:   1, says: "✗ credentials: Object node: spec.providerConfigRef is ProviderConfig default",
		},
		"Observed": {
			reason: "a resource observed never ready keeps the XR from being ready",
			args:   []string{"check", in("compositions/local/machine.yaml"), "--xr", in("compositions/examples/local-machine.yaml"), "--observed", observed, withTools},
			exit:   1, says: "✗ ready: not Ready after 8 rounds: Ready False Creating Unready resources: node",
		},
		"UnknownFunction": {
			reason: "a Function neither staged nor run by the author",
			args:   []string{"check", in("compositions/local/machine.yaml"), "--functions", unknownFunction, withTools},
			exit:   2, says: "Function function-go-templating (package xpkg.crossplane.io/crossplane-contrib/function-go-templating:v0.11.0) is not one the tools directory stages",
		},
		"DevelopmentFunction": {
			reason: "a Function the author runs, called at its target",
			args:   []string{"check", in("compositions/local/machine.yaml"), "--functions", developmentFunction, withTools},
			says:   "✓ ready: Ready after 2 round(s)",
		},
		"ShippedExample": {
			reason: "CAPXP's own Composition without an example: the shipped one",
			args:   []string{"check", in("compositions/aws/machine-control-plane.yaml"), withTools},
			says:   "example XR CAPXP's shipped example",
		},
		"GeneratedExample": {
			reason: "a Composition with its XRD named and no example: one generated from the XRD",
			args:   []string{"check", in("compositions/local/machine.yaml"), "--xrd", in("compositions/xrds/crossplanemachines.yaml"), withTools},
			says:   "example XR generated from the XRD's schema",
		},
		"NoComposition": {
			reason: "the Composition is required",
			args:   []string{"check", withTools},
			exit:   2, says: "capxp composition check: takes one Composition file, got 0 argument(s)",
		},
		"NotAComposition": {
			reason: "the first file must be a Composition",
			args:   []string{"check", in("compositions/examples/local-machine.yaml"), "--xr", in("compositions/examples/local-machine.yaml"), withTools},
			exit:   2, says: `kind is "CrossplaneMachine", want Composition`,
		},
		"UnknownKind": {
			reason: "a Composition of another XR kind needs its XRD named",
			args:   []string{"check", in("compositions/local/machine.yaml"), "--xr", in("compositions/examples/local-machine.yaml"), "--xrd", in("compositions/local/machine.yaml"), withTools},
			exit:   2, says: `kind is "Composition", want CompositeResourceDefinition`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			exit := runComposition(tc.args, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if exit != tc.exit || !strings.Contains(out, tc.says) {
				t.Errorf("%s: exit %d, want %d, saying %q:\n%s", tc.reason, exit, tc.exit, tc.says, out)
			}
		})
	}

	var stdout, stderr bytes.Buffer
	if exit := runComposition([]string{"check", in("compositions/byo/cluster.yaml"), "--xr", in("compositions/examples/byo-cluster.yaml"), withTools, "-o", "json"}, &stdout, &stderr); exit != 0 {
		t.Fatalf("-o json: exit %d: %s%s", exit, stdout.String(), stderr.String())
	}
	var report struct {
		OK       bool `json:"ok"`
		Verdicts []struct {
			Field string `json:"field"`
			OK    bool   `json:"ok"`
		} `json:"verdicts"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil || !report.OK || len(report.Verdicts) == 0 {
		t.Errorf("-o json: %v, %+v:\n%s", err, report, stdout.String())
	}
}

// runFunction runs the staged patch-and-transform function, at the version
// the Configuration depends on, on a free TCP port until the test ends, and
// returns a functions file naming it with the Development runtime under
// name.
func runFunction(t *testing.T, toolsDir, name string) string {
	t.Helper()
	dep, err := packages.Find("xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := tools.Dir(toolsDir).Binary(dep.Name(), dep.Version)
	if err != nil {
		t.Fatal(err)
	}
	var lc net.ListenConfig
	l, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := exec.CommandContext(t.Context(), bin, "--insecure", "--address="+addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		var d net.Dialer
		c, err := d.DialContext(t.Context(), "tcp", addr)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the function does not listen on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	file := filepath.Join(t.TempDir(), "functions.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: `+name+`
  annotations:
    render.crossplane.io/runtime: Development
    render.crossplane.io/runtime-development-target: `+addr+`
spec:
  package: `+dep.Package+`:`+dep.Version+`
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}
