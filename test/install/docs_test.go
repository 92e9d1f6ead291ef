package install

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	ctlsetup "github.com/capxp/cluster-api-provider-crossplane/test/clusterctl"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// docMarker precedes a shell block of a docs page that test/install runs as
// written: `<!-- test: NAME -->`, then the ```sh block.
const docMarker = "<!-- test: "

// docBlock is the shell block of a docs page marked with name; the test
// fails when the page has none.
func docBlock(t *testing.T, page, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(envtest.RepoRoot(), page))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	var block []string
	marked, in := false, false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case in && line == "```":
			return strings.Join(block, "\n") + "\n"
		case in:
			block = append(block, line)
		case strings.TrimSpace(line) == docMarker+name+" -->":
			marked = true
		case marked && line == "```sh":
			in = true
		case marked && strings.TrimSpace(line) != "":
			t.Fatalf("%s: the block marked %q is not a ```sh block: %q follows the marker", page, name, line)
		}
	}
	t.Fatalf("%s has no block marked %s%s -->", page, docMarker, name)
	return ""
}

// runDoc runs the shell block of a docs page marked with name as a user
// would, with bash (-e, -u, pipefail), in dir: kubectl, clusterctl, the
// crossplane CLI and crane on the PATH (the tools directory's, at the versions the
// docs name), KUBECONFIG the plane's administrator's, and env besides. It
// logs what the block printed and fails the test when a command fails.
func runDoc(ctx context.Context, t *testing.T, p *plane.Plane, page, name, dir string, env ...string) {
	t.Helper()
	runDocWith(ctx, t, p.Kubeconfig(), page, name, dir, env...)
}

// runDocWith is runDoc with the kubeconfig given: for a block that runs
// while the plane starts (InstallConfiguration).
func runDocWith(ctx context.Context, t *testing.T, kubeconfig, page, name, dir string, env ...string) {
	t.Helper()
	script := docBlock(t, page, name)
	d := tools.Dir(envtest.ToolsDir())
	bin := filepath.Join(dir, ".bin")
	if err := os.MkdirAll(bin, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []struct{ name, as, version string }{
		{"kubectl", "kubectl", plane.KubectlVersion},
		{"clusterctl", "clusterctl", ctlsetup.Version},
		{"crossplane-cli", "crossplane", plane.CrossplaneCLIVersion},
		{"crane", "crane", plane.CraneVersion},
	} {
		path, err := d.Binary(tool.name, tool.version)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(path, filepath.Join(bin, tool.as)); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + dir, "KUBECONFIG=" + kubeconfig}, env...)
	out, err := cmd.CombinedOutput()
	t.Logf("%s, block %q:\n%s\n%s", page, name, script, out)
	if err != nil {
		t.Fatalf("%s, block %q, as written: %v", page, name, err)
	}
}

// docRegistry is $REGISTRY for a docs block that pushes packages: the
// plane's registry, under the path the release names its packages by
// (ghcr.io/capxp becomes HOST/capxp), where the plane's ImageConfigs send
// the packages' dependencies on one another.
func docRegistry(r *plane.Registry) string {
	_, p, _ := strings.Cut(release.DefaultPackageRegistry, "/")
	return r.Host + "/" + p
}

// registryEnv is the environment of a docs block that pushes to the
// plane's registry: $REGISTRY, and its CA trusted as a user's registry's
// would be by the system.
func registryEnv(r *plane.Registry) []string {
	return []string{"REGISTRY=" + docRegistry(r), "SSL_CERT_FILE=" + r.CAFile}
}
