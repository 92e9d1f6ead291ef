// Package e2e runs CAPXP end to end on the real local management plane
// (test/plane): Crossplane core composing with the real functions and
// provider-kubernetes, CAPI's core controllers, and the capxp manager binary.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
	"github.com/capxp/cluster-api-provider-crossplane/test/plane"
)

var p *plane.Plane

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "capxp-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bin := filepath.Join(dir, "capxp")
	build := exec.Command("go", "build", "-o", bin, "./cmd/capxp") //nolint:gosec // fixed arguments.
	build.Dir = envtest.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "cannot build capxp: %v\n%s", err, out)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	p, err = plane.Start(ctx, plane.Options{
		Dir:           filepath.Join(dir, "plane"),
		ManagerBinary: bin,
		Progress:      func(f string, a ...any) { fmt.Fprintf(os.Stderr, "plane: "+f+"\n", a...) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	p.Stop()
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "the plane's logs are in %s\n", p.Dir())
	}
	return code
}

// TestLocalCluster provisions examples/local on the plane.
func TestLocalCluster(t *testing.T) {
	ctx := t.Context()
	if err := p.ApplyExample(ctx); err != nil {
		t.Fatal(err)
	}
	err := p.WaitForExample(ctx, plane.ExampleMachines, 3*time.Minute, func(st plane.Status) {
		for _, l := range st.Lines {
			t.Log(l)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}
