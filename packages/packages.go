// Package packages reads the Crossplane Configuration package CAPXP ships
// (configuration/crossplane.yaml): the single source of the provider and
// function versions the composition tests render with and the local plane
// runs.
package packages

import (
	"embed"
	"path"
	"strings"

	pkgmetav1 "github.com/crossplane/crossplane/apis/v2/pkg/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

//go:embed configuration/crossplane.yaml
var configuration []byte

// ActivationPolicy is the Configuration's ManagedResourceActivationPolicy.
//
//go:embed configuration/activation-policy.yaml
var ActivationPolicy []byte

// awsModule is the Go module of every package of the AWS family.
const awsModule = "github.com/upbound/provider-aws/v2"

// Modules maps the packages CAPXP depends on to the Go modules they are
// built from: the functions' binaries and the providers' CRDs come from
// these, at the versions the Configuration pins.
var Modules = map[string]string{
	"xpkg.upbound.io/upbound/provider-aws-ec2":                           awsModule,
	"xpkg.upbound.io/upbound/provider-aws-elbv2":                         awsModule,
	"xpkg.upbound.io/upbound/provider-aws-secretsmanager":                awsModule,
	"xpkg.upbound.io/upbound/provider-aws-autoscaling":                   awsModule,
	"xpkg.upbound.io/upbound/provider-aws-eks":                           awsModule,
	"xpkg.upbound.io/upbound/provider-aws-iam":                           awsModule,
	"xpkg.crossplane.io/crossplane-contrib/provider-kubernetes":          "github.com/crossplane-contrib/provider-kubernetes",
	"xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform": "github.com/crossplane-contrib/function-patch-and-transform",
	"xpkg.crossplane.io/crossplane-contrib/function-auto-ready":          "github.com/crossplane-contrib/function-auto-ready",
}

// Dependency is a package the Configuration depends on.
type Dependency struct {
	// Package is its OCI reference without a tag.
	Package string
	// Kind is Provider or Function.
	Kind string
	// Version is the one release it is pinned to.
	Version string
}

// Name is the repository's last path element: the binary a function or
// provider builds to, and the name hack/ensure-tools.sh caches it under.
func (d Dependency) Name() string { return path.Base(d.Package) }

// FunctionName is the name Crossplane gives a Function installed from the
// package: its repository path without the registry, dashed. Compositions
// call functions by it.
func (d Dependency) FunctionName() string {
	_, repo, _ := strings.Cut(d.Package, "/")
	return strings.ReplaceAll(repo, "/", "-")
}

// Configuration decodes the shipped Configuration package strictly.
func Configuration() (*pkgmetav1.Configuration, error) {
	c := &pkgmetav1.Configuration{}
	if err := yaml.UnmarshalStrict(configuration, c); err != nil {
		return nil, errors.Wrap(err, "cannot decode the Configuration package")
	}
	return c, nil
}

// Dependencies lists the Configuration's dependencies of a kind (Provider
// or Function), or all of them for an empty kind.
func Dependencies(kind string) ([]Dependency, error) {
	c, err := Configuration()
	if err != nil {
		return nil, err
	}
	var out []Dependency
	for _, d := range c.Spec.DependsOn {
		if d.Package == nil || d.Kind == nil {
			return nil, errors.Errorf("dependency %+v names no package and kind", d)
		}
		if kind == "" || *d.Kind == kind {
			out = append(out, Dependency{Package: *d.Package, Kind: *d.Kind, Version: d.Version})
		}
	}
	return out, nil
}

// Find is the dependency on a package.
func Find(pkg string) (Dependency, error) {
	all, err := Dependencies("")
	if err != nil {
		return Dependency{}, err
	}
	for _, d := range all {
		if d.Package == pkg {
			return d, nil
		}
	}
	return Dependency{}, errors.Errorf("the Configuration package does not depend on %s", pkg)
}

// ClusterctlDir holds the clusterctl provider files written by hand: the
// metadata and the cluster templates.
const ClusterctlDir = "clusterctl"

// Clusterctl holds ClusterctlDir.
//
//go:embed clusterctl/*.yaml
var Clusterctl embed.FS
