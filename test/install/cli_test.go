package install

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release/cliarchive"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	ctlsetup "github.com/capxp/cluster-api-provider-crossplane/test/clusterctl"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// TestCompositionCheckFromTheRelease: a composition author with the
// release's command-line archive and nothing else (no checkout, no tools
// cache, no Go) checks each shipped Composition, as a file of their own,
// with the capxp of the archive: each holds, in seconds.
func TestCompositionCheckFromTheRelease(t *testing.T) {
	ctx, dir := begin(t, "cli", 10*time.Minute)
	bins := ctlsetup.ReleaseBinaries(ctx, t, dir)
	archive, err := cliarchive.Write(dir, capxp.Version(), bins, tools.Dir(envtest.ToolsDir()), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(archive)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the archive %s: %d MB", filepath.Base(archive), st.Size()>>20)
	// The author's machine: the archive unpacked in their home, their
	// Compositions in a folder of their own.
	home := t.TempDir()
	untar(t, archive, home)
	bin := filepath.Join(home, strings.TrimSuffix(filepath.Base(archive), ".tar.gz"), "capxp")
	work := filepath.Join(home, "platform")
	if err := os.MkdirAll(work, 0o750); err != nil {
		t.Fatal(err)
	}
	var shipped []string
	for _, backend := range []string{"aws", "byo", "local"} {
		files, err := filepath.Glob(filepath.Join(envtest.RepoRoot(), "compositions", backend, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		shipped = append(shipped, files...)
	}
	var checked int
	for _, src := range shipped {
		raw, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(filepath.Dir(src)) + "-" + filepath.Base(src)
		if err := os.WriteFile(filepath.Join(work, name), raw, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, bin, "composition", "check", name)
		cmd.Dir = work
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home}
		started := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("capxp composition check %s from the archive: %v\n%s", name, err, out)
			continue
		}
		checked++
		t.Logf("%s: %s in %s", name, strings.SplitN(string(out), "\n", 2)[0], time.Since(started).Round(10*time.Millisecond))
	}
	if checked == 0 && !t.Failed() {
		t.Fatal("no shipped Composition checked")
	}
}

// untar unpacks a .tar.gz of regular files into dir.
func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			t.Fatalf("the archive names %s, outside its folder", h.Name)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		out, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)) //nolint:gosec // a path checked to be below dir.
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, tr); err != nil { //nolint:gosec // the test's own archive.
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
