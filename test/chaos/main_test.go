// Package chaos runs CAPXP under faults on the real local management plane
// (internal/dev/plane): the manager killed outright again and again, replicas
// that lose their leader, and components that go away. Each test counts what
// a user would count after the faults, in the management and the workload
// API servers: clusters converged, composed resources neither orphaned nor
// duplicated, deletions finished, conditions that said why.
//
// `make test-chaos` runs it; the seed of its random points is printed and
// -chaos-seed replays them.
package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/capxp/cluster-api-provider-crossplane/internal/dev/lifeline"
	"github.com/capxp/cluster-api-provider-crossplane/internal/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

var (
	p    *plane.Plane
	bin  string
	seed = flag.Int64("chaos-seed", 0, "seed of the random points faults strike at; 0 picks one (printed)")
)

func TestMain(m *testing.M) {
	// The plane starts etcd and kube-apiserver through links to this test
	// binary, so that they die with it.
	lifeline.Main()
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "capxp-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bin = filepath.Join(dir, "bin")
	build := exec.CommandContext(context.Background(), "go", "build", "-o", bin+string(filepath.Separator), "./cmd/capxp") //nolint:gosec // fixed arguments.
	build.Dir = envtest.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "cannot build capxp: %v\n%s", err, out)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	p, err = plane.Start(ctx, plane.Options{
		Dir:           filepath.Join(dir, "plane"),
		ManagerBinary: filepath.Join(bin, "capxp"),
		Tools:         tools.Dir(envtest.ToolsDir()),
		// The replicas test reads who wrote what.
		AuditManagement: true,
		Progress:        func(f string, a ...any) { fmt.Fprintf(os.Stderr, "plane: "+f+"\n", a...) },
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
