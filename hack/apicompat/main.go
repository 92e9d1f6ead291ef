// Command apicompat fails when an API version that the previous release
// served changed incompatibly in the working tree: it reads the XRDs and
// CRDs of both (the previous release's from git) and lists each breaking
// change (internal/apicompat). `make verify` runs it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/capxp/cluster-api-provider-crossplane/internal/apicompat"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
)

// dirs hold what CAPXP serves: the XRDs (the XR kinds) and the CRDs (the
// templates, grants and records).
var dirs = []string{"compositions/xrds", "config/crd/bases"}

func main() {
	base := flag.String("base", release.PreviousCommit, "The commit of the release to stay compatible with.")
	flag.Parse()
	if err := run(context.Background(), *base); err != nil {
		fmt.Fprintln(os.Stderr, "apicompat:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, base string) error {
	git := func(args ...string) *exec.Cmd { return exec.CommandContext(ctx, "git", args...) }
	if out, err := git("cat-file", "-e", base+"^{commit}").CombinedOutput(); err != nil {
		return fmt.Errorf("the previous release's commit %s is not in this checkout's history (a shallow clone? `git fetch --unshallow`): %v %s", base, err, out)
	}
	prev, err := apis(func(dir string) (map[string][]byte, error) {
		out, err := git("ls-tree", "--name-only", base, dir+"/").Output()
		if err != nil {
			return nil, fmt.Errorf("cannot list %s at %s: %w", dir, base, err)
		}
		files := map[string][]byte{}
		for _, f := range strings.Fields(string(out)) {
			if !strings.HasSuffix(f, ".yaml") {
				continue
			}
			if files[f], err = git("show", base+":"+f).Output(); err != nil {
				return nil, fmt.Errorf("cannot read %s at %s: %w", f, base, err)
			}
		}
		return files, nil
	})
	if err != nil {
		return err
	}
	next, err := apis(func(dir string) (map[string][]byte, error) {
		names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return nil, err
		}
		files := map[string][]byte{}
		for _, f := range names {
			if files[f], err = os.ReadFile(f); err != nil {
				return nil, err
			}
		}
		return files, nil
	})
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(prev))
	for k := range prev {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var breaks []string
	for _, k := range keys {
		n, ok := next[k]
		if !ok {
			breaks = append(breaks, fmt.Sprintf("%s (%s) is no longer served", k, prev[k].Source))
			continue
		}
		breaks = append(breaks, apicompat.Breaking(prev[k], n)...)
	}
	if len(breaks) > 0 {
		return fmt.Errorf("%d incompatible changes to API versions release %s served (docs/decisions.md, \"What an upgrade never changes\": add a version instead):\n  %s",
			len(breaks), release.PreviousVersion, strings.Join(breaks, "\n  "))
	}
	fmt.Printf("the %d kinds release %s served are served compatibly\n", len(prev), release.PreviousVersion)
	return nil
}

// apis reads every API in dirs from read, by group and kind.
func apis(read func(dir string) (map[string][]byte, error)) (map[string]apicompat.API, error) {
	out := map[string]apicompat.API{}
	for _, dir := range dirs {
		files, err := read(dir)
		if err != nil {
			return nil, err
		}
		for name, b := range files {
			r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
			for {
				doc, err := r.Read()
				if err == io.EOF {
					break
				}
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				if len(bytes.TrimSpace(stripComments(doc))) == 0 {
					continue
				}
				a, err := apicompat.Read(name, doc)
				if err != nil {
					return nil, err
				}
				out[a.Kind+"."+a.Group] = a
			}
		}
	}
	return out, nil
}

// stripComments drops a document's comment lines.
func stripComments(doc []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' && string(t) != "---" {
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}
