// Package release assembles what CAPXP ships: the clusterctl provider files
// of infrastructure-crossplane (components, metadata, cluster templates) in a
// clusterctl file repository layout, the manager's OCI image, and the roots
// of the Crossplane packages (the Configuration, and the bridge as a
// Provider) that `crossplane xpkg build` packs.
//
// Everything is built from the sources embedded in the binary (package capxp,
// compositions and packages), so the local plane installs exactly what a
// release holds without a checkout.
package release

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/mod/semver"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	"github.com/capxp/cluster-api-provider-crossplane/packages"
)

// Names of the clusterctl provider and its files.
const (
	// Provider is the clusterctl provider's label and the folder of its
	// releases in a clusterctl repository.
	Provider = "infrastructure-crossplane"
	// ComponentsFile is what `clusterctl init` applies.
	ComponentsFile = "infrastructure-components.yaml"
	// MetadataFile maps release series to CAPI contracts.
	MetadataFile = "metadata.yaml"
	// ManagerImageName is the image name the Deployment in config/ carries
	// until a release sets the real one.
	ManagerImageName = "capxp-manager"
	// DefaultImageRepository is where releases publish the manager image.
	DefaultImageRepository = "ghcr.io/capxp/" + ManagerImageName
)

// Options say which release to assemble.
type Options struct {
	// Version is the release (vMAJOR.MINOR.PATCH); capxp.Version() when
	// empty.
	Version string
	// ImageRepository is the manager image without its tag;
	// DefaultImageRepository when empty.
	ImageRepository string
	// PackageRegistry is where the Crossplane packages live (a registry
	// host and path, without a repository name); DefaultPackageRegistry
	// when empty.
	PackageRegistry string
}

func (o Options) withDefaults() (Options, error) {
	if o.Version == "" {
		o.Version = capxp.Version()
	}
	if o.ImageRepository == "" {
		o.ImageRepository = DefaultImageRepository
	}
	if !semver.IsValid(o.Version) || semver.Canonical(o.Version) != o.Version && semver.Prerelease(o.Version) == "" {
		return o, errors.Errorf("release version %q is not a semantic version vMAJOR.MINOR.PATCH", o.Version)
	}
	if strings.ContainsAny(path.Base(o.ImageRepository), ":@") {
		return o, errors.Errorf("image repository %q must not carry a tag: the release version is the tag", o.ImageRepository)
	}
	return o, nil
}

// Image is the manager image's reference for a release.
func (o Options) Image() string {
	o, _ = o.withDefaults()
	return o.ImageRepository + ":" + o.Version
}

// Components renders infrastructure-components.yaml: kustomize's build of
// config/default with the release's manager image.
func Components(o Options) ([]byte, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	// An overlay sets the image, as `kustomize edit set image` would.
	return kustomize(capxp.ComponentsKustomization, fmt.Sprintf("images:\n- name: %s\n  newName: %s\n  newTag: %s\n",
		ManagerImageName, o.ImageRepository, o.Version))
}

// kustomize builds a kustomization of the embedded config through an
// overlay holding extra (kustomization fields), in memory.
func kustomize(kdir, extra string) ([]byte, error) {
	mem := filesys.MakeFsInMemory()
	if err := fs.WalkDir(capxp.Manifests, capxp.ConfigDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := capxp.Manifests.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile("/"+p, b)
	}); err != nil {
		return nil, errors.Wrap(err, "cannot read the embedded config")
	}
	if err := mem.WriteFile("/release/kustomization.yaml", []byte("resources:\n- ../"+kdir+"\n"+extra)); err != nil {
		return nil, errors.Wrap(err, "cannot write the release overlay")
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/release")
	if err != nil {
		return nil, errors.Wrapf(err, "cannot build %s with kustomize", kdir)
	}
	out, err := m.AsYaml()
	return out, errors.Wrapf(err, "cannot encode the build of %s", kdir)
}

// metadata is clusterctl's metadata.yaml, as much of it as is checked here.
type metadata struct {
	ReleaseSeries []struct {
		Major    int32  `json:"major"`
		Minor    int32  `json:"minor"`
		Contract string `json:"contract"`
	} `json:"releaseSeries"`
}

// Metadata is packages/clusterctl/metadata.yaml, checked to list the
// release's series.
func Metadata(o Options) ([]byte, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	b, err := packages.Clusterctl.ReadFile(path.Join(packages.ClusterctlDir, MetadataFile))
	if err != nil {
		return nil, errors.Wrap(err, "cannot read the clusterctl metadata")
	}
	m := &metadata{}
	if err := yaml.Unmarshal(b, m); err != nil {
		return nil, errors.Wrap(err, "cannot decode the clusterctl metadata")
	}
	var major, minor int32
	if _, err := fmt.Sscanf(semver.MajorMinor(o.Version), "v%d.%d", &major, &minor); err != nil {
		return nil, errors.Wrapf(err, "cannot read the release series of %s", o.Version)
	}
	for _, s := range m.ReleaseSeries {
		if s.Major == major && s.Minor == minor {
			return b, nil
		}
	}
	return nil, errors.Errorf("%s lists no release series v%d.%d: add it (with the CAPI contract it implements) before releasing %s",
		path.Join("packages", packages.ClusterctlDir, MetadataFile), major, minor, o.Version)
}

// WriteClusterctl writes the clusterctl provider files of a release into a
// clusterctl file repository rooted at dir
// (dir/infrastructure-crossplane/<version>/) and returns the path of the
// components file, the URL clusterctl's configuration names
// (file://<path>).
func WriteClusterctl(dir string, o Options) (string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, Provider, o.Version)
	if err := os.MkdirAll(out, 0o755); err != nil { //nolint:gosec // release files are public
		return "", errors.Wrap(err, "cannot create the clusterctl repository")
	}
	files := map[string][]byte{}
	if files[ComponentsFile], err = Components(o); err != nil {
		return "", err
	}
	if files[MetadataFile], err = Metadata(o); err != nil {
		return "", err
	}
	// Cluster templates (flavors), and the ClusterClasses `clusterctl
	// generate cluster` includes for those that name one.
	templates, err := fs.Glob(packages.Clusterctl, path.Join(packages.ClusterctlDir, "cluster-template*.yaml"))
	if err != nil {
		return "", errors.Wrap(err, "cannot list the cluster templates")
	}
	classes, err := fs.Glob(packages.Clusterctl, path.Join(packages.ClusterctlDir, "clusterclass-*.yaml"))
	if err != nil {
		return "", errors.Wrap(err, "cannot list the cluster classes")
	}
	templates = append(templates, classes...)
	for _, t := range templates {
		if files[path.Base(t)], err = packages.Clusterctl.ReadFile(t); err != nil {
			return "", errors.Wrapf(err, "cannot read %s", t)
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil { //nolint:gosec // release files are public
			return "", errors.Wrapf(err, "cannot write %s", name)
		}
	}
	return filepath.Join(out, ComponentsFile), nil
}

// ClusterctlConfig is a clusterctl configuration file that installs
// infrastructure-crossplane from a file repository written by
// WriteClusterctl, with extra lines (other providers, cert-manager)
// appended as given.
func ClusterctlConfig(componentsPath string, extra ...string) []byte {
	b := &bytes.Buffer{}
	fmt.Fprintf(b, "providers:\n- name: crossplane\n  type: InfrastructureProvider\n  url: file://%s\n", componentsPath)
	for _, e := range extra {
		b.WriteString(e)
		if !strings.HasSuffix(e, "\n") {
			b.WriteString("\n")
		}
	}
	return b.Bytes()
}

// ClusterctlFolder is the release folder of its clusterctl repository.
const ClusterctlFolder = "clusterctl"

// MonitoringDir is the release folder of the alerts (a PrometheusRule) and
// the Grafana dashboard, as config/monitoring holds them.
const MonitoringDir = "monitoring"

// WriteMonitoring writes the alerts and the dashboard into dir and returns
// it.
func WriteMonitoring(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // release files are public
		return "", errors.Wrap(err, "cannot create the monitoring folder")
	}
	files, err := fs.Glob(capxp.Manifests, path.Join(capxp.MonitoringDir, "*"))
	if err != nil {
		return "", errors.Wrap(err, "cannot list the alerts and dashboard")
	}
	for _, f := range files {
		b, err := capxp.Manifests.ReadFile(f)
		if err != nil {
			return "", errors.Wrapf(err, "cannot read %s", f)
		}
		if err := os.WriteFile(filepath.Join(dir, path.Base(f)), b, 0o644); err != nil { //nolint:gosec // release files are public
			return "", errors.Wrapf(err, "cannot write %s", path.Base(f))
		}
	}
	return dir, nil
}

// Write writes a whole release into out, as `make release` does: the
// clusterctl repository (out/clusterctl), the manager's and the function's
// images from their static linux binaries (none when bins.Manager is
// empty), crossplane-setup.yaml, the alerts and dashboard (out/monitoring),
// and the Crossplane packages built with the crossplane CLI (only their
// roots when cli is empty). It returns a line per file written.
func Write(ctx context.Context, out string, o Options, bins Binaries, arch, cli string) ([]string, error) {
	var lines []string
	c, err := WriteClusterctl(filepath.Join(out, ClusterctlFolder), o)
	if err != nil {
		return nil, err
	}
	lines = append(lines, "clusterctl components: "+c)
	if bins.Manager != "" {
		if bins.Function == "" {
			return nil, errors.New("a release with the manager's image needs the function-asg-instances binary for the Function package's")
		}
		img, err := WriteImage(out, o, bins, arch)
		if err != nil {
			return nil, err
		}
		lines = append(lines, "manager image: "+img)
	}
	setup, err := CrossplaneSetup(o)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(out, CrossplaneSetupFile), setup, 0o644); err != nil { //nolint:gosec // release files are public
		return nil, errors.Wrap(err, "cannot write the Crossplane setup")
	}
	lines = append(lines, "Crossplane setup: "+filepath.Join(out, CrossplaneSetupFile))
	mon, err := WriteMonitoring(filepath.Join(out, MonitoringDir))
	if err != nil {
		return nil, err
	}
	lines = append(lines, "alerts and dashboard: "+mon)
	if cli == "" {
		for _, p := range []struct {
			name  string
			write func(string, Options) error
		}{{"configuration", WriteConfigurationRoot}, {"compositions", WriteCompositionsRoot}, {"provider", WriteProviderRoot}, {"function", WriteFunctionRoot}} {
			dir := filepath.Join(out, "package-"+p.name)
			if err := p.write(dir, o); err != nil {
				return nil, err
			}
			lines = append(lines, p.name+" package root: "+dir)
		}
		return lines, nil
	}
	if bins.Manager == "" {
		return nil, errors.New("the Provider and Function packages embed the images of capxp and function-asg-instances: a release with packages needs both binaries")
	}
	if err := WritePackages(ctx, out, o, cli); err != nil {
		return nil, err
	}
	return append(lines,
		"Configuration package (Crossplane's package manager: the Compositions and the bridge): "+filepath.Join(out, o.ConfigurationPackageFile()),
		"Compositions package (beside clusterctl's bridge): "+filepath.Join(out, o.CompositionsPackageFile()),
		"Provider package: "+filepath.Join(out, o.ProviderPackageFile()),
		"Function package: "+filepath.Join(out, o.FunctionPackageFile())), nil
}

// VersionOf is the version of the release written into dir: the one folder
// of its clusterctl repository (clusterctl/infrastructure-crossplane/<version>).
func VersionOf(dir string) (string, error) {
	entries, err := os.ReadDir(filepath.Join(dir, ClusterctlFolder, Provider))
	if err != nil {
		return "", errors.Wrapf(err, "%s is not a release (`make release` writes one)", dir)
	}
	var versions []string
	for _, e := range entries {
		if e.IsDir() && semver.IsValid(e.Name()) {
			versions = append(versions, e.Name())
		}
	}
	if len(versions) != 1 {
		return "", errors.Errorf("the release %s holds %d versions (%s), want one", dir, len(versions), strings.Join(versions, ", "))
	}
	return versions[0], nil
}
