// Package capxp embeds the repository's own files that programs need
// outside a checkout: the local management plane (cmd/capxp-dev) installs
// the template CRDs and applies the example cluster from here, and reads the
// versions of the modules whose CRDs it installs from go.mod, so a binary
// built with -trimpath and run anywhere carries them.
//
// The XRDs and Compositions are embedded by package compositions, and the
// Configuration package (the pinned provider and function versions) by
// package packages; this package holds the rest.
package capxp

import (
	"bufio"
	"bytes"
	"embed"
	"fmt"
	"strings"
)

// Manifests holds config (the kustomize sources of the clusterctl
// components: the template CRDs and ClusterProviderConfigGrant generated
// from apis/, RBAC, the manager's Deployment, its webhook Service and
// certificate), examples/local, examples/byo, examples/platform and
// examples/external, examples/topology, examples/managed,
// examples/managed-topology (the example clusters) and VERSION (the release
// being built).
//
//go:embed config examples/local/*.yaml examples/byo/*.yaml examples/platform/*.yaml examples/external/*.yaml examples/topology/*.yaml examples/managed/*.yaml examples/managed-topology/*.yaml VERSION
var Manifests embed.FS

// Paths of Manifests.
const (
	// CRDsDir holds CAPXP's own CRDs.
	CRDsDir = "config/crd/bases"
	// LocalExample is the example cluster on the local backend.
	LocalExample = "examples/local/cluster.yaml"
	// BYOExample is the example cluster on hosts that already exist.
	BYOExample = "examples/byo/cluster.yaml"
	// PlatformExample is the example cluster of a platform team's own
	// machine kind, whose XRD and Composition are PlatformXRD.
	PlatformExample = "examples/platform/cluster.yaml"
	PlatformXRD     = "examples/platform/xrd.yaml"
	// ExternalExample is the example cluster of CAPXP machines under an
	// InfraCluster another system manages, whose kind and RBAC are
	// ExternalInfrastructure.
	ExternalExample        = "examples/external/cluster.yaml"
	ExternalInfrastructure = "examples/external/infrastructure.yaml"
	// TopologyExample is the example cluster created from a ClusterClass.
	TopologyExample = "examples/topology/cluster.yaml"
	// ManagedTopologyExample is the example cluster with a managed control
	// plane created from a ClusterClass.
	ManagedTopologyExample = "examples/managed-topology/cluster.yaml"
	// ManagedExample is the example cluster whose control plane is a
	// CrossplaneControlPlane, with a CrossplaneMachinePool of workers.
	ManagedExample = "examples/managed/cluster.yaml"
	// ConfigDir holds the kustomize sources of the clusterctl components;
	// ComponentsKustomization builds infrastructure-components.yaml.
	ConfigDir               = "config"
	ComponentsKustomization = "config/default"
	// CrossplaneKustomization builds what the Crossplane packages need
	// beside them: the bridge's RBAC and runtime configuration.
	CrossplaneKustomization = "config/crossplane"
	// MonitoringDir holds the alerts (a PrometheusRule) and the Grafana
	// dashboard a release ships.
	MonitoringDir = "config/monitoring"
)

// Version is the release this source builds (the VERSION file).
func Version() string {
	b, err := Manifests.ReadFile("VERSION")
	if err != nil {
		panic(err) // embedded at build time
	}
	return strings.TrimSpace(string(b))
}

// goMod is the module's go.mod: with a tidy go.mod (make verify checks it),
// its requirements are the versions built into every binary and test of the
// module. Test binaries carry no dependency versions in their build
// information, so this is the one source for both.
//
//go:embed go.mod
var goMod []byte

// RequiredVersion is the version of a module that go.mod requires.
func RequiredVersion(module string) (string, error) {
	s := bufio.NewScanner(bytes.NewReader(goMod))
	block := false
	for s.Scan() {
		f := strings.Fields(strings.TrimSpace(strings.SplitN(s.Text(), "//", 2)[0]))
		switch {
		case len(f) == 0:
		case f[0] == "require" && len(f) == 2 && f[1] == "(":
			block = true
		case f[0] == ")":
			block = false
		case f[0] == "require" && len(f) == 3 && f[1] == module:
			return f[2], nil
		case block && len(f) == 2 && f[0] == module:
			return f[1], nil
		}
	}
	return "", fmt.Errorf("go.mod does not require %s", module)
}
