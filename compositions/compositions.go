// Package compositions holds CAPXP's XRDs (generated from apis/) and the
// Compositions of each backend, embedded for the tools that install them.
//
// Backends are chosen with labels: a CrossplaneCluster selects one with
// spec.crossplane.compositionSelector.matchLabels capxp.dev/backend (aws,
// byo or local); an AWS CrossplaneMachine adds capxp.dev/machine-role
// (control-plane or worker); a CrossplaneMachinePool of EKS managed nodes
// selects aws-eks. See README.md in this folder.
package compositions

import (
	"embed"
	"io/fs"
	"path"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Labels Compositions carry for selection.
const (
	// LabelBackend names the infrastructure a Composition builds: aws, byo
	// or local, or a variant of one in its folder (aws-eks).
	LabelBackend = "capxp.dev/backend"
	// LabelMachineRole tells an AWS machine Composition for control-plane
	// machines (registered in the API load balancer) from the worker one.
	LabelMachineRole = "capxp.dev/machine-role"
)

// The local backend's managed control plane is the workload cluster's API
// server; the plane publishes the version it serves where a service's API
// would: in this ConfigMap of the workload cluster, which the local
// CrossplaneControlPlane Composition observes.
const (
	LocalControlPlaneNamespace  = "kube-public"
	LocalControlPlaneRecord     = "capxp-local-control-plane"
	LocalControlPlaneVersionKey = "version"
)

// The local backend's machine pools are the plane's auto scaling groups:
// the local CrossplaneMachinePool Composition asks for one with a ConfigMap
// of the workload cluster in LocalMachinePoolNamespace (named
// <XR namespace>.<XR name>; keys LocalMachinePoolKey*), the plane registers
// that many Nodes, and publishes their provider IDs, as a JSON list, in the
// ConfigMap of the same name with LocalMachinePoolInstancesSuffix, which
// the Composition observes.
const (
	LocalMachinePoolNamespace         = "capxp-local-machine-pools"
	LocalMachinePoolInstancesSuffix   = ".instances"
	LocalMachinePoolKeyNamespace      = "namespace"
	LocalMachinePoolKeyName           = "name"
	LocalMachinePoolKeyReplicas       = "replicas"
	LocalMachinePoolKeyFailureDomains = "failureDomains"
	LocalMachinePoolKeyVersion        = "version"
	LocalMachinePoolKeyProviderIDs    = "providerIDs"
)

// Backends are the folders holding Compositions.
var Backends = []string{"aws", "byo", "local"}

// FS holds the XRDs, every backend's Compositions, and an example XR of
// each Composition (examples/BACKEND-cluster.yaml, BACKEND-controlplane.yaml,
// BACKEND-machine.yaml, BACKEND-machinepool.yaml, or
// BACKEND-machine-ROLE.yaml for the backends with machine roles).
//
//go:embed xrds/*.yaml aws/*.yaml byo/*.yaml local/*.yaml examples/*.yaml
var FS embed.FS

// ExamplesDir is the folder of FS holding the example XRs.
const ExamplesDir = "examples"

// Example is the example XR of a shipped Composition, found by its
// composite kind and its labels.
func Example(comp *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	kind, _, _ := unstructured.NestedString(comp.Object, "spec", "compositeTypeRef", "kind")
	backend := comp.GetLabels()[LabelBackend]
	var name string
	switch kind {
	case "CrossplaneCluster":
		name = backend + "-cluster"
	case "CrossplaneControlPlane":
		name = backend + "-controlplane"
	case "CrossplaneMachinePool":
		name = backend + "-machinepool"
	case "CrossplaneMachine":
		name = backend + "-machine"
		if role := comp.GetLabels()[LabelMachineRole]; role != "" {
			name += "-" + role
		}
	}
	if backend == "" || name == "" {
		return nil, errors.Errorf("composition %s is not one of CAPXP's (no %s label for a CrossplaneCluster, CrossplaneControlPlane, CrossplaneMachine or CrossplaneMachinePool)", comp.GetName(), LabelBackend)
	}
	x, err := Read(path.Join(ExamplesDir, name+".yaml"))
	if err != nil {
		return nil, errors.Errorf("CAPXP ships no example XR for composition %s (backend %s): give one", comp.GetName(), backend)
	}
	return x, nil
}

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

// ComposedKinds lists the kind of every resource template of a backend's
// Compositions (patch-and-transform steps' resource bases), each once,
// sorted by group and kind.
func ComposedKinds(backend string) ([]schema.GroupVersionKind, error) {
	comps, err := ReadDir(backend)
	if err != nil {
		return nil, err
	}
	seen := map[schema.GroupVersionKind]bool{}
	var out []schema.GroupVersionKind
	for _, c := range comps {
		steps, _, _ := unstructured.NestedSlice(c.Object, "spec", "pipeline")
		for _, s := range steps {
			step, _ := s.(map[string]any)
			res, _, _ := unstructured.NestedSlice(step, "input", "resources")
			for _, r := range res {
				rm, _ := r.(map[string]any)
				base, _, _ := unstructured.NestedMap(rm, "base")
				gvk := (&unstructured.Unstructured{Object: base}).GroupVersionKind()
				if gvk.Kind == "" || seen[gvk] {
					continue
				}
				seen[gvk] = true
				out = append(out, gvk)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return out[i].Group < out[j].Group
		}
		return out[i].Kind < out[j].Kind
	})
	return out, nil
}

// Plural is the resource name upjet and provider-kubernetes give a kind:
// SecretPolicy's is secretpolicies, Instance's instances.
func Plural(kind string) string {
	k := strings.ToLower(kind)
	if stem, ok := strings.CutSuffix(k, "y"); ok && !strings.HasSuffix(stem, "a") && !strings.HasSuffix(stem, "e") && !strings.HasSuffix(stem, "o") {
		return stem + "ies"
	}
	return k + "s"
}
