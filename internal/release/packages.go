package release

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	pkgmetav1 "github.com/crossplane/crossplane/apis/v2/pkg/meta/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/packages"
)

// The Crossplane packages of a release.
const (
	// ProviderPackageName is the bridge's Provider package.
	ProviderPackageName = "provider-capxp"
	// ConfigurationPackageName is the Configuration package a platform
	// installs to run CAPXP with Crossplane's package manager: it brings
	// the CompositionsPackageName Configuration and the bridge.
	ConfigurationPackageName = "configuration-capxp"
	// CompositionsPackageName is the Configuration package of the XRDs and
	// Compositions with the providers and functions they compose with, and
	// no bridge: what a platform installs beside clusterctl's bridge.
	CompositionsPackageName = "configuration-capxp-compositions"
	// FunctionPackageName is function-asg-instances' Function package.
	FunctionPackageName = "function-asg-instances"
	// DefaultPackageRegistry is where releases publish the packages.
	DefaultPackageRegistry = "ghcr.io/capxp"
	// CrossplaneSetupFile is what a platform applies before installing the
	// packages: the bridge's RBAC and runtime configuration.
	CrossplaneSetupFile = "crossplane-setup.yaml"
)

func (o Options) registry() string {
	if o.PackageRegistry == "" {
		return DefaultPackageRegistry
	}
	return strings.TrimSuffix(o.PackageRegistry, "/")
}

// ProviderPackage is the bridge's package repository, without a tag.
func (o Options) ProviderPackage() string { return o.registry() + "/" + ProviderPackageName }

// ConfigurationPackage is the Configuration's package repository, without a
// tag.
func (o Options) ConfigurationPackage() string { return o.registry() + "/" + ConfigurationPackageName }

// CompositionsPackage is the Compositions' Configuration package
// repository, without a tag.
func (o Options) CompositionsPackage() string { return o.registry() + "/" + CompositionsPackageName }

// FunctionPackage is function-asg-instances' package repository, without a
// tag.
func (o Options) FunctionPackage() string { return o.registry() + "/" + FunctionPackageName }

// FunctionName is the name Crossplane gives the Function it installs from
// FunctionPackage, which Compositions call it by.
func (o Options) FunctionName() string {
	return packages.Dependency{Package: o.FunctionPackage()}.FunctionName()
}

// DefaultFunctionName is the name the shipped Compositions call
// function-asg-instances by: its name from DefaultPackageRegistry. A release
// for another registry renames the calls.
var DefaultFunctionName = Options{}.FunctionName()

// configurationMeta is the shipped Configuration's metadata, and the
// options with their defaults.
func configurationMeta(o Options) (Options, *pkgmetav1.Configuration, error) {
	o, err := o.withDefaults()
	if err != nil {
		return o, nil, err
	}
	c, err := packages.Configuration()
	return o, c, err
}

// WriteConfigurationRoot writes the root of the Configuration a platform
// installs to run CAPXP with Crossplane's package manager: its
// crossplane.yaml alone, depending on the release's Compositions
// Configuration and the bridge's Provider package. Installed beside
// clusterctl's bridge it would run a second one; that path installs the
// Compositions Configuration instead.
func WriteConfigurationRoot(dir string, o Options) error {
	o, c, err := configurationMeta(o)
	if err != nil {
		return err
	}
	c.Annotations = ownAnnotations(c, "CAPXP: Cluster API infrastructure backed by Crossplane, with its bridge. "+
		"Brings "+CompositionsPackageName+" (the XRDs and Compositions, and the providers and functions they compose with) "+
		"and the bridge ("+ProviderPackageName+", which needs the RBAC and runtime configuration of "+CrossplaneSetupFile+"). "+
		"With clusterctl's bridge (clusterctl init --infrastructure crossplane), install "+CompositionsPackageName+" instead.")
	c.Spec.DependsOn = []pkgmetav1.Dependency{{
		APIVersion: ptr.To("pkg.crossplane.io/v1"), Kind: ptr.To("Configuration"),
		Package: ptr.To(o.CompositionsPackage()), Version: o.Version,
	}, {
		APIVersion: ptr.To("pkg.crossplane.io/v1"), Kind: ptr.To("Provider"),
		Package: ptr.To(o.ProviderPackage()), Version: o.Version,
	}}
	meta, err := yaml.Marshal(c)
	if err != nil {
		return errors.Wrap(err, "cannot encode the Configuration's metadata")
	}
	return writeRoot(dir, map[string][]byte{"crossplane.yaml": meta})
}

// WriteCompositionsRoot writes the Compositions Configuration's root: its
// crossplane.yaml (with function-asg-instances added to the pinned
// dependencies, at the release's version), the activation policy, the XRDs
// and every backend's Compositions. It runs no bridge.
func WriteCompositionsRoot(dir string, o Options) error {
	o, c, err := configurationMeta(o)
	if err != nil {
		return err
	}
	c.Name = "capxp-compositions"
	c.Spec.DependsOn = append(c.Spec.DependsOn, pkgmetav1.Dependency{
		APIVersion: ptr.To("pkg.crossplane.io/v1"), Kind: ptr.To("Function"),
		Package: ptr.To(o.FunctionPackage()), Version: o.Version,
	})
	meta, err := yaml.Marshal(c)
	if err != nil {
		return errors.Wrap(err, "cannot encode the Compositions Configuration's metadata")
	}
	files := map[string][]byte{"crossplane.yaml": meta, "activation-policy.yaml": packages.ActivationPolicy}
	if err := fs.WalkDir(compositions.FS, ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p == compositions.ExamplesDir:
			// Example XRs are not package objects, and examples are
			// never packed.
			return fs.SkipDir
		case d.IsDir():
			return nil
		}
		b, err := compositions.FS.ReadFile(p)
		files[p] = renameFunction(b, o.FunctionName())
		return err
	}); err != nil {
		return errors.Wrap(err, "cannot read the XRDs and Compositions")
	}
	return writeRoot(dir, files)
}

// renameFunction makes a Composition call function-asg-instances by the
// name Crossplane gives it when installed from the release's registry.
func renameFunction(b []byte, name string) []byte {
	if name == DefaultFunctionName {
		return b
	}
	return bytes.ReplaceAll(b, []byte("name: "+DefaultFunctionName+"\n"), []byte("name: "+name+"\n"))
}

// WriteFunctionRoot writes function-asg-instances' Function package root:
// its crossplane.yaml alone (it takes no input). The runtime image
// (FunctionImage) is embedded by `crossplane xpkg build`.
func WriteFunctionRoot(dir string, o Options) error {
	if _, err := o.withDefaults(); err != nil {
		return err
	}
	meta, err := FunctionMeta()
	if err != nil {
		return err
	}
	return writeRoot(dir, map[string][]byte{"crossplane.yaml": meta})
}

// ownAnnotations are the package metadata of one of CAPXP's own packages:
// the Configuration's maintainer, source and license, and its description.
func ownAnnotations(c *pkgmetav1.Configuration, description string) map[string]string {
	a := map[string]string{"meta.crossplane.io/description": description}
	for _, k := range []string{"meta.crossplane.io/maintainer", "meta.crossplane.io/source", "meta.crossplane.io/license"} {
		a[k] = c.Annotations[k]
	}
	return a
}

// FunctionMeta is the Function package's crossplane.yaml.
func FunctionMeta() ([]byte, error) {
	c, err := packages.Configuration()
	if err != nil {
		return nil, err
	}
	f := &pkgmetav1.Function{
		TypeMeta: metav1.TypeMeta{APIVersion: pkgmetav1.SchemeGroupVersion.String(), Kind: pkgmetav1.FunctionKind},
		ObjectMeta: metav1.ObjectMeta{Name: FunctionPackageName, Annotations: ownAnnotations(c,
			"Lists the instances of the AWS auto scaling groups a Composition composes "+
				"(provider-upjet-aws) with the credentials the groups use, and writes their provider IDs to "+
				"status.outputs.providerIDList.")},
		Spec: pkgmetav1.FunctionSpec{MetaSpec: pkgmetav1.MetaSpec{Crossplane: c.Spec.Crossplane}},
	}
	meta, err := yaml.Marshal(f)
	return meta, errors.Wrap(err, "cannot encode the Function's metadata")
}

// WriteProviderRoot writes the bridge's Provider package root: its
// crossplane.yaml and CAPXP's own CRDs (the templates and the grants). The
// runtime image is embedded by `crossplane xpkg build
// --embed-runtime-image-tarball`.
func WriteProviderRoot(dir string, o Options) error {
	if _, err := o.withDefaults(); err != nil {
		return err
	}
	c, err := packages.Configuration()
	if err != nil {
		return err
	}
	p := &pkgmetav1.Provider{
		TypeMeta: metav1.TypeMeta{APIVersion: pkgmetav1.SchemeGroupVersion.String(), Kind: pkgmetav1.ProviderKind},
		ObjectMeta: metav1.ObjectMeta{Name: ProviderPackageName, Annotations: ownAnnotations(c,
			"The CAPXP bridge: maps Crossplane composite resources onto Cluster API's "+
				"InfraCluster, InfraMachine, InfraMachinePool and ControlPlane contracts. Needs the RBAC and runtime configuration of "+CrossplaneSetupFile+".")},
		Spec: pkgmetav1.ProviderSpec{MetaSpec: pkgmetav1.MetaSpec{Crossplane: c.Spec.Crossplane}},
	}
	meta, err := yaml.Marshal(p)
	if err != nil {
		return errors.Wrap(err, "cannot encode the Provider's metadata")
	}
	files := map[string][]byte{"crossplane.yaml": meta}
	crds, err := fs.Glob(capxp.Manifests, path.Join(capxp.CRDsDir, "*.yaml"))
	if err != nil {
		return errors.Wrap(err, "cannot list CAPXP's CRDs")
	}
	for _, f := range crds {
		if files[path.Join("crds", path.Base(f))], err = capxp.Manifests.ReadFile(f); err != nil {
			return errors.Wrapf(err, "cannot read %s", f)
		}
	}
	return writeRoot(dir, files)
}

// writeRoot replaces dir with the files.
func writeRoot(dir string, files map[string][]byte) error {
	if err := os.RemoveAll(dir); err != nil {
		return errors.Wrapf(err, "cannot replace %s", dir)
	}
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil { //nolint:gosec // package contents are public
			return errors.Wrapf(err, "cannot create %s", filepath.Dir(p))
		}
		if err := os.WriteFile(p, b, 0o644); err != nil { //nolint:gosec // package contents are public
			return errors.Wrapf(err, "cannot write %s", p)
		}
	}
	return nil
}

// CrossplaneSetup renders crossplane-setup.yaml: kustomize's build of
// config/crossplane (the bridge's ClusterRoles bound to the service account
// its DeploymentRuntimeConfig names, and an ImageConfig that gives the
// bridge's package that runtime configuration).
func CrossplaneSetup(o Options) ([]byte, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	b, err := kustomize(capxp.CrossplaneKustomization, "")
	if err != nil {
		return nil, err
	}
	const placeholder = "prefix: PROVIDER_PACKAGE"
	if !bytes.Contains(b, []byte(placeholder)) {
		return nil, errors.Errorf("%s has no ImageConfig prefix to set", capxp.CrossplaneKustomization)
	}
	return bytes.ReplaceAll(b, []byte(placeholder), []byte("prefix: "+o.ProviderPackage())), nil
}

// BuildPackage packs a package root into an .xpkg file with the crossplane
// CLI (`crossplane xpkg build`), embedding a runtime image tarball when one
// is given. Examples are never packed.
func BuildPackage(ctx context.Context, cli, root, out, runtimeImage string) error {
	empty, err := os.MkdirTemp("", "capxp-no-examples-")
	if err != nil {
		return errors.Wrap(err, "cannot create an empty examples folder")
	}
	defer os.RemoveAll(empty)
	args := []string{"xpkg", "build", "--package-root=" + root, "--examples-root=" + empty, "-o", out}
	if runtimeImage != "" {
		args = append(args, "--embed-runtime-image-tarball="+runtimeImage)
	}
	cmd := exec.CommandContext(ctx, cli, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return errors.Errorf("crossplane %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(b)))
	}
	return nil
}

// ProviderPackageFile is the bridge's .xpkg file in a release.
func (o Options) ProviderPackageFile() string {
	o, _ = o.withDefaults()
	return ProviderPackageName + "-" + o.Version + ".xpkg"
}

// FunctionPackageFile is the Function's .xpkg file in a release.
func (o Options) FunctionPackageFile() string {
	o, _ = o.withDefaults()
	return FunctionPackageName + "-" + o.Version + ".xpkg"
}

// CompositionsPackageFile is the Compositions Configuration's .xpkg file in
// a release.
func (o Options) CompositionsPackageFile() string {
	o, _ = o.withDefaults()
	return CompositionsPackageName + "-" + o.Version + ".xpkg"
}

// ConfigurationPackageFile is the Configuration's .xpkg file in a release.
func (o Options) ConfigurationPackageFile() string {
	o, _ = o.withDefaults()
	return ConfigurationPackageName + "-" + o.Version + ".xpkg"
}

// WritePackages writes the four package roots into dir
// (package-configuration, package-compositions, package-provider,
// package-function) and builds them with the crossplane CLI into
// ConfigurationPackageFile, CompositionsPackageFile, ProviderPackageFile and
// FunctionPackageFile, the Provider's and the
// Function's with their images (WriteImage's tarballs in dir) embedded.
func WritePackages(ctx context.Context, dir string, o Options, cli string) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	for _, p := range []struct {
		name, file, image string
		write             func(string, Options) error
	}{
		{"configuration", o.ConfigurationPackageFile(), "", WriteConfigurationRoot},
		{"compositions", o.CompositionsPackageFile(), "", WriteCompositionsRoot},
		{"provider", o.ProviderPackageFile(), filepath.Join(dir, ImageTarball), WriteProviderRoot},
		{"function", o.FunctionPackageFile(), filepath.Join(dir, FunctionImageTarball), WriteFunctionRoot},
	} {
		root := filepath.Join(dir, "package-"+p.name)
		if err := p.write(root, o); err != nil {
			return err
		}
		if err := BuildPackage(ctx, cli, root, filepath.Join(dir, p.file), p.image); err != nil {
			return errors.Wrapf(err, "cannot build the %s package", p.name)
		}
	}
	return nil
}
