package plane

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/packages"
)

// A mirrored package: a package reference as the Configuration names it and
// the .xpkg file the plane's registry serves for it.
type mirrored struct {
	// ref is the package's repository as its dependents name it (registry
	// host included), tag the version it is pushed at.
	ref, tag string
	xpkg     string
}

// awsFamily is the AWS family's config package, which every service
// package of the family depends on.
const (
	awsFamilyRegistry = "xpkg.upbound.io/upbound"
	awsFamily         = awsFamilyRegistry + "/provider-family-aws"
)

// mirrorPackages builds the package of every dependency of the
// Configuration (and the AWS family package they depend on) from what
// hack/ensure-tools.sh staged, with the crossplane CLI, caching each .xpkg
// in the tools directory, and lists them with the release's four packages.
func (p *Plane) mirrorPackages(ctx context.Context) ([]mirrored, error) {
	deps, err := packages.Dependencies("")
	if err != nil {
		return nil, err
	}
	cache := filepath.Join(string(p.opts.Tools), "xpkg")
	if err := os.MkdirAll(cache, 0o750); err != nil {
		return nil, errors.Wrap(err, "cannot create the package cache")
	}
	var out []mirrored
	family := false
	for _, d := range deps {
		file := filepath.Join(cache, d.Name()+"-"+d.Version+".xpkg")
		out = append(out, mirrored{ref: d.Package, tag: d.Version, xpkg: file})
		if _, err := os.Stat(file); err == nil {
			if strings.HasPrefix(d.Package, awsFamilyRegistry+"/provider-aws-") {
				family = true
			}
			continue
		}
		var root string
		switch {
		case strings.HasPrefix(d.Package, awsFamilyRegistry+"/provider-aws-"):
			family = true
			if root, err = p.awsRoot(d.Name(), strings.TrimPrefix(d.Name(), "provider-aws-"), d.Version); err != nil {
				return nil, err
			}
		default:
			if root, err = p.opts.Tools.Package(d.Name(), d.Version); err != nil {
				return nil, err
			}
		}
		if err := buildCached(ctx, p.inputs.crossplaneCLI, root, file); err != nil {
			return nil, err
		}
	}
	if family {
		v := ""
		for _, d := range deps {
			if strings.HasPrefix(d.Package, awsFamilyRegistry+"/provider-aws-") {
				v = d.Version
			}
		}
		file := filepath.Join(cache, path.Base(awsFamily)+"-"+v+".xpkg")
		if _, err := os.Stat(file); err != nil {
			root, err := p.awsRoot(path.Base(awsFamily), "config", v)
			if err != nil {
				return nil, err
			}
			if err := buildCached(ctx, p.inputs.crossplaneCLI, root, file); err != nil {
				return nil, err
			}
		}
		out = append(out, mirrored{ref: awsFamily, tag: v, xpkg: file})
	}
	own, err := releasePackages(p.opts.Release)
	if err != nil {
		return nil, err
	}
	out = append(out, own...)
	for _, m := range out {
		if _, err := os.Stat(m.xpkg); err != nil {
			return nil, errors.Wrapf(err, "no package file for %s (run `make release` for CAPXP's own)", m.ref)
		}
	}
	return out, nil
}

// releasePackages are the four packages of the release written into dir,
// at its version.
func releasePackages(dir string) ([]mirrored, error) {
	v, err := release.VersionOf(dir)
	if err != nil {
		return nil, err
	}
	o := release.Options{Version: v}
	return []mirrored{
		{ref: o.ConfigurationPackage(), tag: v, xpkg: filepath.Join(dir, o.ConfigurationPackageFile())},
		{ref: o.CompositionsPackage(), tag: v, xpkg: filepath.Join(dir, o.CompositionsPackageFile())},
		{ref: o.ProviderPackage(), tag: v, xpkg: filepath.Join(dir, o.ProviderPackageFile())},
		{ref: o.FunctionPackage(), tag: v, xpkg: filepath.Join(dir, o.FunctionPackageFile())},
	}, nil
}

// buildCached builds a package into file, atomically.
func buildCached(ctx context.Context, cli, root, file string) error {
	tmp := file + ".tmp"
	if err := release.BuildPackage(ctx, cli, root, tmp, ""); err != nil {
		return err
	}
	return errors.Wrapf(os.Rename(tmp, file), "cannot cache %s", file)
}

// awsRoot writes the root of one package of the AWS family, as the family's
// build assembles it: the package metadata rendered from the module's
// template for the service ("config" for the family package), and the CRDs
// of the service's API groups (cluster-scoped and namespaced).
func (p *Plane) awsRoot(pkg, service, version string) (string, error) {
	staged, err := p.opts.Tools.PackageFile("provider-aws", version, "crossplane.yaml.tmpl")
	if err != nil {
		return "", err
	}
	raw, err := os.ReadFile(filepath.Join(staged, "crossplane.yaml.tmpl"))
	if err != nil {
		return "", errors.Wrap(err, "cannot read the AWS family's package template")
	}
	tmpl, err := template.New(pkg).Parse(string(raw))
	if err != nil {
		return "", errors.Wrap(err, "cannot parse the AWS family's package template")
	}
	root := filepath.Join(p.dir, "package-roots", pkg)
	if err := os.MkdirAll(filepath.Join(root, "crds"), 0o750); err != nil {
		return "", errors.Wrap(err, "cannot create a package root")
	}
	f, err := os.Create(filepath.Join(root, "crossplane.yaml"))
	if err != nil {
		return "", errors.Wrap(err, "cannot write a package's metadata")
	}
	defer f.Close()
	if err := tmpl.Execute(f, map[string]string{
		"Name": pkg, "Service": service, "ProviderName": "aws", "ProviderAuthGroup": "aws",
		"XpkgRegOrg": awsFamilyRegistry, "DepConstraint": version,
	}); err != nil {
		return "", errors.Wrapf(err, "cannot render the metadata of %s", pkg)
	}
	if err := f.Close(); err != nil {
		return "", errors.Wrapf(err, "cannot write the metadata of %s", pkg)
	}
	group := service + ".aws"
	if service == "config" {
		group = "aws"
	}
	var crds []string
	for _, g := range []string{group + ".upbound.io_", group + ".m.upbound.io_"} {
		m, err := filepath.Glob(filepath.Join(staged, "crds", g+"*.yaml"))
		if err != nil {
			return "", errors.Wrap(err, "cannot list the AWS family's CRDs")
		}
		crds = append(crds, m...)
	}
	if len(crds) == 0 {
		return "", errors.Errorf("%s holds no CRDs of %s: stage it again with hack/ensure-tools.sh provider-aws", staged, group)
	}
	for _, c := range crds {
		b, err := os.ReadFile(c)
		if err != nil {
			return "", errors.Wrapf(err, "cannot read %s", c)
		}
		if err := os.WriteFile(filepath.Join(root, "crds", filepath.Base(c)), b, 0o600); err != nil {
			return "", errors.Wrapf(err, "cannot write %s", c)
		}
	}
	return root, nil
}

// mirrorRewrites are the registries the mirrored packages' references name,
// each to be rewritten to the plane's registry by an ImageConfig, as a
// platform points Crossplane at its internal mirror.
func mirrorRewrites(ms []mirrored) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		r, err := name.NewRepository(m.ref)
		if err != nil {
			return nil, errors.Wrapf(err, "invalid package reference %s", m.ref)
		}
		h := r.RegistryStr()
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out, nil
}

// repoPath is a reference's repository path without its registry host.
func repoPath(ref string) string {
	_, p, _ := strings.Cut(ref, "/")
	return p
}
