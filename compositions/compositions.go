// Package compositions holds CAPXP's XRDs (generated from apis/) and the
// Compositions of each backend, embedded for the tools that install them.
//
// Backends are chosen with labels: a CrossplaneCluster selects one with
// spec.crossplane.compositionSelector.matchLabels capxp.dev/backend (aws,
// byo or local); an AWS CrossplaneMachine adds capxp.dev/machine-role
// (control-plane or worker). See README.md in this folder.
package compositions

import (
	"embed"
	"io/fs"
	"path"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Labels Compositions carry for selection.
const (
	// LabelBackend names the infrastructure a Composition builds: aws, byo
	// or local.
	LabelBackend = "capxp.dev/backend"
	// LabelMachineRole tells an AWS machine Composition for control-plane
	// machines (registered in the API load balancer) from the worker one.
	LabelMachineRole = "capxp.dev/machine-role"
)

// Backends are the folders holding Compositions.
var Backends = []string{"aws", "byo", "local"}

// FS holds the XRDs and every backend's Compositions.
//
//go:embed xrds/*.yaml aws/*.yaml byo/*.yaml local/*.yaml
var FS embed.FS

// Read decodes one manifest of FS.
func Read(name string) (*unstructured.Unstructured, error) {
	raw, err := fs.ReadFile(FS, name)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot read %s", name)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		return nil, errors.Wrapf(err, "cannot decode %s", name)
	}
	return u, nil
}

// ReadDir decodes every manifest of one folder of FS (xrds or a backend),
// sorted by file name.
func ReadDir(dir string) ([]*unstructured.Unstructured, error) {
	files, err := fs.Glob(FS, path.Join(dir, "*.yaml"))
	if err != nil {
		return nil, errors.Wrapf(err, "cannot list %s", dir)
	}
	sort.Strings(files)
	out := make([]*unstructured.Unstructured, 0, len(files))
	for _, f := range files {
		u, err := Read(f)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}
