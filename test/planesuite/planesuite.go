// Package planesuite runs a test suite on one local management plane
// (dev/plane), as the e2e and fault suites do: it builds the
// binaries the suite runs, starts the plane, runs the tests, stops the plane
// and keeps its logs when a test failed.
package planesuite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// Suite is a test binary's plane and the binaries built for it.
type Suite struct {
	// Plane is the running plane.
	Plane *plane.Plane
	// Bin is the folder the commands were built into.
	Bin string
}

// Run builds cmds (package paths, ./cmd/capxp first: the plane runs it as
// the manager) into a temporary folder named after the suite, starts the
// plane with o (its Dir, ManagerBinary, Tools and Progress set here), hands
// the suite to started, and runs the tests. It returns the exit code for
// TestMain.
func Run(m *testing.M, name string, cmds []string, o plane.Options, started func(Suite)) int {
	dir, err := os.MkdirTemp("", "capxp-"+name+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bin := filepath.Join(dir, "bin")
	build := exec.CommandContext(context.Background(), "go", append([]string{"build", "-o", bin + string(filepath.Separator)}, cmds...)...) //nolint:gosec // the suite's own packages.
	build.Dir = envtest.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "cannot build %v: %v\n%s", cmds, err, out)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	o.Dir = filepath.Join(dir, "plane")
	o.ManagerBinary = filepath.Join(bin, "capxp")
	o.Tools = tools.Dir(envtest.ToolsDir())
	o.Progress = func(f string, a ...any) { fmt.Fprintf(os.Stderr, "plane: "+f+"\n", a...) }
	p, err := plane.Start(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	started(Suite{Plane: p, Bin: bin})
	code := m.Run()
	p.Stop()
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "the plane's logs are in %s\n", p.Dir())
	}
	return code
}
