package plane

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
)

// capxpVersion is the version of this checkout's release.
func capxpVersion() string { return capxp.Version() }

// ConfigurationRef is the reference of the release's Configuration package
// as a platform installs it (Crossplane pulls it from the plane's registry
// through an ImageConfig).
func ConfigurationRef() string {
	return release.Options{}.ConfigurationPackage() + ":" + capxpVersion()
}

// CompositionsRef is the reference of the release's Compositions
// Configuration package: what a platform installs beside clusterctl's
// bridge.
func CompositionsRef() string {
	return release.Options{}.CompositionsPackage() + ":" + capxpVersion()
}

// configurationRef is the Configuration the plane installs, at the version
// of Options.Release: the Compositions alone when clusterctl runs the
// bridge.
func (p *Plane) configurationRef() (string, error) {
	v, err := release.VersionOf(p.opts.Release)
	if err != nil {
		return "", err
	}
	o := release.Options{Version: v}
	if p.opts.Clusterctl {
		return o.CompositionsPackage() + ":" + v, nil
	}
	return o.ConfigurationPackage() + ":" + v, nil
}

// registryCA is the CA bundle of a registry, empty without one.
func registryCA(r *Registry) string {
	if r == nil {
		return ""
	}
	return r.CAFile
}

// Registry is the plane's package registry (package mode), nil otherwise.
func (p *Plane) Registry() *Registry { return p.registry }

// startRegistry serves every package CAPXP's Configuration needs from an OCI
// registry on loopback: the release's four packages and the packages of the
// Configuration's dependencies, each pushed under its own repository path.
func (p *Plane) startRegistry(ctx context.Context) error {
	ms, err := p.mirrorPackages(ctx)
	if err != nil {
		return err
	}
	if p.registry, err = startRegistry(ctx, filepath.Join(p.dir, "registry")); err != nil {
		return err
	}
	for _, m := range ms {
		if err := p.registry.Push(ctx, repoPath(m.ref), m.tag, m.xpkg); err != nil {
			return err
		}
	}
	p.mirrored = ms
	return nil
}

// WaitForPackages waits until the Configuration of ref (a package
// reference with its tag) and every package installed are as
// installPackages waits for them: installed, healthy where they run here,
// CAPXP's XRDs established.
func (p *Plane) WaitForPackages(ctx context.Context, ref string, timeout time.Duration) error {
	return p.waitPackages(ctx, ref, timeout)
}

// installPackages installs CAPXP's Configuration as a platform does on a
// cluster whose packages come from an internal mirror: it applies the
// release's crossplane-setup.yaml (not with Clusterctl: the bridge is
// clusterctl's), points each registry the packages name at the plane's
// registry with an ImageConfig, installs the Configuration (the
// Compositions' with Clusterctl), and waits until Crossplane has installed
// it and every dependency, the packages that run here run, and CAPXP's XRDs
// are established.
func (p *Plane) installPackages(ctx context.Context) error {
	if !p.opts.Clusterctl {
		setup, err := os.ReadFile(filepath.Join(p.opts.Release, release.CrossplaneSetupFile))
		if err != nil {
			return errors.Wrap(err, "cannot read the release's Crossplane setup")
		}
		if err := p.applyManifests(ctx, setup); err != nil {
			return errors.Wrapf(err, "cannot apply %s", release.CrossplaneSetupFile)
		}
	}
	if err := p.mirrorRegistries(ctx); err != nil {
		return err
	}
	p.startPackageRuntime()

	ref, err := p.configurationRef()
	if err != nil {
		return err
	}
	install := p.opts.InstallConfiguration
	if install == nil {
		install = func(ctx context.Context, in PackageInstall) (string, error) {
			c := &pkgv1.Configuration{ObjectMeta: metav1.ObjectMeta{Name: "capxp"}}
			c.Spec.Package = in.Ref
			c.Spec.RevisionActivationPolicy = ptr.To(pkgv1.AutomaticActivation)
			if err := p.client.Create(ctx, c); err != nil && !apierrors.IsAlreadyExists(err) {
				return "", errors.Wrap(err, "cannot create the Configuration")
			}
			return in.Ref, nil
		}
	}
	if ref, err = install(ctx, PackageInstall{Kubeconfig: p.kubeconfig, Ref: ref, Registry: p.registry}); err != nil {
		return err
	}
	return p.waitPackages(ctx, ref, 5*time.Minute)
}

// mirrorRegistries points each registry the packages name at the plane's
// registry with an ImageConfig, as a platform points Crossplane at an
// internal mirror.
func (p *Plane) mirrorRegistries(ctx context.Context) error {
	hosts, err := mirrorRewrites(p.mirrored)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		ic := &pkgv1beta1.ImageConfig{
			ObjectMeta: metav1.ObjectMeta{Name: "mirror-" + strings.NewReplacer(".", "-", ":", "-").Replace(h)},
			Spec: pkgv1beta1.ImageConfigSpec{
				MatchImages:  []pkgv1beta1.ImageMatch{{Type: pkgv1beta1.Prefix, Prefix: h + "/"}},
				RewriteImage: &pkgv1beta1.ImageRewrite{Prefix: p.registry.Host + "/"},
			},
		}
		if err := p.client.Create(ctx, ic); err != nil && !apierrors.IsAlreadyExists(err) {
			return errors.Wrapf(err, "cannot create ImageConfig %s", ic.Name)
		}
	}
	return nil
}

// waitPackages waits until the Configuration of ref and every package it
// depends on is installed, every package that runs here is healthy, and
// CAPXP's XRDs are established; it fails early when a package's runtime
// fails.
func (p *Plane) waitPackages(ctx context.Context, ref string, timeout time.Duration) error {
	xrds, err := compositions.ReadDir("xrds")
	if err != nil {
		return err
	}
	var pending string
	err = p.xp.core.waitFor(ctx, timeout, func() bool {
		if err := p.runtime.Err(); err != nil {
			pending = err.Error()
			return true
		}
		pending = p.pendingPackages(ctx, ref, xrds)
		return pending == ""
	})
	if err == nil && pending != "" {
		return errors.Errorf("a package's runtime failed: %s", pending)
	}
	return errors.Wrapf(err, "the packages were not installed (%s)", pending)
}

// pendingPackages says what is not yet installed, healthy or established;
// empty when nothing is.
func (p *Plane) pendingPackages(ctx context.Context, ref string, xrds []*unstructured.Unstructured) string {
	cl := &pkgv1.ConfigurationList{}
	if err := p.client.List(ctx, cl); err != nil {
		return err.Error()
	}
	found := false
	for i := range cl.Items {
		c := &cl.Items[i]
		if c.Spec.Package != ref {
			continue
		}
		found = true
		if s := notTrue(c.GetCondition(pkgv1.TypeInstalled), c.GetCondition(pkgv1.TypeHealthy)); s != "" {
			return "Configuration " + c.Name + ": " + s
		}
	}
	if !found {
		return "no Configuration of " + ref
	}
	runs := func(pkg string) bool {
		if _, ok := p.xp.function(pkg); ok {
			return true
		}
		_, aws := p.inputs.awsRuntimes[pkg]
		return aws || pkg == providerKubernetesName || pkg == release.ProviderPackageName
	}
	var pkgs []pkgv1.Package
	fl := &pkgv1.FunctionList{}
	pl := &pkgv1.ProviderList{}
	if err := p.client.List(ctx, fl); err != nil {
		return err.Error()
	}
	if err := p.client.List(ctx, pl); err != nil {
		return err.Error()
	}
	for i := range fl.Items {
		pkgs = append(pkgs, &fl.Items[i])
	}
	for i := range pl.Items {
		pkgs = append(pkgs, &pl.Items[i])
	}
	if len(pkgs) == 0 {
		return "no dependency installed yet"
	}
	for _, pk := range pkgs {
		cs := []xpv2.Condition{pk.GetCondition(pkgv1.TypeInstalled)}
		if runs(packageName(pk.GetSource())) {
			cs = append(cs, pk.GetCondition(pkgv1.TypeHealthy))
		}
		if s := notTrue(cs...); s != "" {
			return fmt.Sprintf("%s %s: %s", pk.GetObjectKind().GroupVersionKind().Kind, pk.GetName(), s)
		}
	}
	for _, x := range xrds {
		xrd := &xpextv1.CompositeResourceDefinition{}
		if err := p.client.Get(ctx, client.ObjectKey{Name: x.GetName()}, xrd); err != nil {
			return "XRD " + x.GetName() + ": " + err.Error()
		}
		if s := notTrue(xrd.Status.GetCondition(xpextv1.TypeEstablished)); s != "" {
			return "XRD " + x.GetName() + ": " + s
		}
	}
	return ""
}

// applyManifests creates every object of a multi-document YAML, leaving
// those that exist.
func (p *Plane) applyManifests(ctx context.Context, manifests []byte) error {
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err != nil {
			if err == io.EOF {
				return nil
			}
			return errors.Wrap(err, "cannot decode a manifest")
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := p.client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return errors.Wrapf(err, "cannot create %s %s", u.GetKind(), u.GetName())
		}
	}
}

// Packages lists the packages installed on the plane, a line each with
// their Installed and Healthy conditions, sorted.
func (p *Plane) Packages(ctx context.Context) ([]string, error) {
	var out []string
	cl := &pkgv1.ConfigurationList{}
	fl := &pkgv1.FunctionList{}
	pl := &pkgv1.ProviderList{}
	for _, l := range []client.ObjectList{cl, fl, pl} {
		if err := p.client.List(ctx, l); err != nil {
			return nil, errors.Wrap(err, "cannot list packages")
		}
	}
	var pkgs []pkgv1.Package
	for i := range cl.Items {
		pkgs = append(pkgs, &cl.Items[i])
	}
	for i := range fl.Items {
		pkgs = append(pkgs, &fl.Items[i])
	}
	for i := range pl.Items {
		pkgs = append(pkgs, &pl.Items[i])
	}
	for _, pk := range pkgs {
		in, h := pk.GetCondition(pkgv1.TypeInstalled), pk.GetCondition(pkgv1.TypeHealthy)
		out = append(out, fmt.Sprintf("%s Installed=%s Healthy=%s %s", pk.GetSource(), in.Status, h.Status, h.Message))
	}
	sort.Strings(out)
	return out, nil
}

// notTrue describes the first condition that is not True; empty when all
// are.
func notTrue(cs ...xpv2.Condition) string {
	for _, c := range cs {
		if c.Status != corev1.ConditionTrue {
			return fmt.Sprintf("%s=%s %s %s", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	return ""
}
