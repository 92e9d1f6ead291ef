package clusterctl

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// The release before this checkout's, which the upgrade tests install
// first (release.PreviousCommit, built as `make release` builds it there;
// docs/upgrade.md).
const (
	PreviousVersion = release.PreviousVersion
	PreviousCommit  = release.PreviousCommit
)

// PreviousRelease builds the previous release from PreviousCommit (its
// tree from git, its own release command, its own go.mod) once into the
// tools directory, and returns the release's folder and its capxp binary
// (the manager image's). A checkout without
// that commit in its history (a shallow clone) fails the test and says so.
func PreviousRelease(ctx context.Context, t testing.TB) (string, string) {
	t.Helper()
	d := tools.Dir(envtest.ToolsDir())
	base := filepath.Join(string(d), "releases", PreviousVersion+"-"+PreviousCommit[:12])
	rel, bin := filepath.Join(base, "release"), filepath.Join(base, "bin", "capxp")
	if v, err := release.VersionOf(rel); err == nil && v == PreviousVersion {
		if _, err := os.Stat(filepath.Join(base, "done")); err == nil {
			return rel, bin
		}
	}
	cli, err := d.Binary("crossplane-cli", plane.CrossplaneCLIVersion)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(base); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(base, "src")
	if err := os.MkdirAll(src, 0o750); err != nil {
		t.Fatal(err)
	}
	run := func(dir string, env []string, name string, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building the previous release %s (commit %s): %s %v: %v\n%s", PreviousVersion, PreviousCommit, name, args, err, out)
		}
	}
	root := envtest.RepoRoot()
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "cat-file", "-e", PreviousCommit+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("the previous release's commit %s is not in this checkout's history (a shallow clone? `git fetch --unshallow`): %v\n%s", PreviousCommit, err, out)
	}
	run(root, nil, "sh", "-c", `git archive --format=tar "$1" | tar -x -C "$2"`, "sh", PreviousCommit, src)
	bins := filepath.Join(base, "bin")
	run(src, []string{"CGO_ENABLED=0", "GOOS=linux"}, "go", "build", "-trimpath", "-o", bins+string(filepath.Separator), "./cmd/capxp", "./cmd/function-asg-instances")
	run(src, nil, "go", "run", "./hack/release", "-out", rel, "-arch", runtime.GOARCH,
		"-manager-binary", bin, "-function-binary", filepath.Join(bins, "function-asg-instances"), "-crossplane-cli", cli)
	if v, err := release.VersionOf(rel); err != nil || v != PreviousVersion {
		t.Fatalf("commit %s built release %q (%v), want %s", PreviousCommit, v, err, PreviousVersion)
	}
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "done"), []byte(PreviousCommit+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return rel, bin
}
