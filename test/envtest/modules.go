package envtest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Modules whose CRDs the environment loads.
const (
	capiModule = "sigs.k8s.io/cluster-api"
	// CrossplaneModule is Crossplane core: its CRDs, its render protocol and
	// the crossplane binary the tests and the plane run, at one version.
	CrossplaneModule = "github.com/crossplane/crossplane/v2"
)

var (
	rootOnce sync.Once
	root     string
)

// RepoRoot is the root of the CAPXP checkout, found from this source file.
func RepoRoot() string {
	rootOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root = filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	})
	return root
}

// ToolsDir is where hack/ensure-tools.sh caches the binaries it builds:
// $CAPXP_TOOLS_CACHE (which the Makefile sets), or .cache/tools.
func ToolsDir() string {
	if d := os.Getenv("CAPXP_TOOLS_CACHE"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), ".cache", "tools")
}

// Tool is the path of a binary hack/ensure-tools.sh built, by name and
// version.
func Tool(name, version string) string {
	return filepath.Join(ToolsDir(), name+"-"+version, name)
}

// Module is a module the project requires, as the Go command resolves it.
type Module struct {
	Version string
	Dir     string
}

// Required looks up a module the project requires.
func Required(module string) (Module, error) {
	out, err := goCmd("list", "-m", "-f", "{{.Version}} {{.Dir}}", module)
	if err != nil {
		return Module{}, err
	}
	version, dir, _ := strings.Cut(out, " ")
	if dir == "" {
		return Module{}, errors.Errorf("module %s is not downloaded: run `go mod download`", module)
	}
	return Module{Version: version, Dir: dir}, nil
}

// DownloadModule downloads a module at an exact version through the Go
// module proxy (or finds it in the module cache) and returns its directory.
// Tests read provider CRDs this way from modules the project never imports.
func DownloadModule(module, version string) (string, error) {
	out, err := goCmd("mod", "download", "-json", module+"@"+version)
	var m struct{ Dir, Error string }
	if jerr := json.Unmarshal([]byte(out), &m); jerr != nil && err == nil {
		return "", errors.Wrap(jerr, "cannot parse go mod download output")
	}
	if m.Error != "" {
		return "", errors.Errorf("cannot download %s@%s: %s", module, version, m.Error)
	}
	if err != nil {
		return "", err
	}
	if m.Dir == "" {
		return "", errors.Errorf("cannot download %s@%s: no directory reported", module, version)
	}
	return m.Dir, nil
}

func goCmd(args ...string) (string, error) {
	cmd := exec.CommandContext(context.Background(), "go", args...)
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", errors.Errorf("go %s: %s", strings.Join(args, " "), strings.TrimSpace(string(ee.Stderr)))
		}
		return "", errors.Wrapf(err, "go %s", strings.Join(args, " "))
	}
	return strings.TrimSpace(string(out)), nil
}
