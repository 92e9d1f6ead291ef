// Package plane runs CAPXP's local management plane, with nothing faked:
// etcd and kube-apiserver for the management cluster and a second API server
// as the local workload cluster, kube-controller-manager for garbage
// collection, Crossplane core with the composition functions as local
// processes behind mutual TLS, provider-kubernetes for the local backend,
// CAPI's core controllers, and the CAPXP manager binary. Everything listens on
// loopback, starts in dependency order with readiness checks, and stops in
// reverse order leaving no process behind. `capxp dev` and the end-to-end
// tests run on it.
package plane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/packages"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// Options configure a plane.
type Options struct {
	// Dir holds the plane's logs, certificates, kubeconfigs and package
	// cache. A new temporary directory when empty; kept after Stop.
	Dir string
	// ManagerBinary is the capxp binary run as the CAPXP manager.
	ManagerBinary string
	// Progress receives a line per step; nil discards them.
	Progress func(format string, args ...any)
}

// Plane is a running local management plane.
type Plane struct {
	opts     Options
	dir      string
	versions versions

	mgmt *envtest.Environment
	// client reaches the management cluster as an administrator and knows
	// Crossplane's package types too.
	client client.Client
	// kubeconfig is the administrator's kubeconfig file of the management
	// cluster, for the components run as processes.
	kubeconfig string
	// Workload is the workload cluster's API server.
	Workload *envtest.Workload
	capi     *envtest.CAPI
	procs    []*process
}

// versions are the components' versions: Crossplane's from go.mod, the
// functions' and provider's from the Configuration package.
type versions struct {
	crossplane         envtest.Module
	functions          []packages.Dependency
	providerKubernetes packages.Dependency
}

// Management is the management cluster's API server.
func (p *Plane) Management() *envtest.Environment { return p.mgmt }

// Kubeconfig is the path of the management cluster's administrator
// kubeconfig.
func (p *Plane) Kubeconfig() string { return p.kubeconfig }

// Dir is where the plane keeps logs and state.
func (p *Plane) Dir() string { return p.dir }

func (p *Plane) progress(format string, args ...any) {
	if p.opts.Progress != nil {
		p.opts.Progress(format, args...)
	}
}

// Start starts every component in dependency order. On error it stops what
// it started.
func Start(ctx context.Context, o Options) (*Plane, error) {
	p := &Plane{opts: o, dir: o.Dir}
	if p.dir == "" {
		d, err := os.MkdirTemp("", "capxp-plane-")
		if err != nil {
			return nil, errors.Wrap(err, "cannot create the plane's directory")
		}
		p.dir = d
	}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return nil, errors.Wrap(err, "cannot create the plane's directory")
	}
	var err error
	if p.versions, err = readVersions(); err != nil {
		return nil, err
	}
	if err := p.start(ctx); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

func (p *Plane) start(ctx context.Context) error {
	step := func(what string, f func(context.Context) error) error {
		start := time.Now()
		p.progress("starting %s", what)
		if err := f(ctx); err != nil {
			return errors.Wrapf(err, "cannot start %s", what)
		}
		p.progress("started %s in %s", what, time.Since(start).Round(100*time.Millisecond))
		return nil
	}
	steps := []struct {
		what string
		f    func(context.Context) error
	}{
		{"the management cluster (etcd, kube-apiserver)", p.startManagement},
		{"the workload cluster (etcd, kube-apiserver)", p.startWorkload},
		{"kube-controller-manager (garbage collection)", p.startControllerManager},
		// provider-kubernetes before the functions: it cannot move its
		// metrics listener off :8080, where the functions' SDK also tries
		// (and, unlike the provider, tolerates failing).
		{"provider-kubernetes", p.startProviderKubernetes},
		{"Crossplane core and the composition functions", p.startCrossplane},
		{"CAPI's core controllers", p.startCAPI},
		{"the CAPXP manager", p.startManager},
		{"CAPXP's XRDs and Compositions", p.install},
	}
	for _, s := range steps {
		if err := step(s.what, s.f); err != nil {
			return err
		}
	}
	return nil
}

// Stop stops every component in reverse order and waits for each.
func (p *Plane) Stop() {
	for i := len(p.procs) - 1; i >= 0; i-- {
		if p.procs[i].name == "capxp-manager" {
			p.procs[i].stop(30 * time.Second)
		}
	}
	if p.capi != nil {
		_ = p.capi.Stop()
	}
	for i := len(p.procs) - 1; i >= 0; i-- {
		p.procs[i].stop(30 * time.Second)
	}
	if p.Workload != nil {
		_ = p.Workload.Stop()
	}
	if p.mgmt != nil {
		_ = p.mgmt.Stop()
	}
}

func (p *Plane) startManagement(_ context.Context) error {
	capi, err := envtest.CAPICRDs()
	if err != nil {
		return err
	}
	pkv := p.versions.providerKubernetes
	pk, err := envtest.DownloadModule(packages.Modules[pkv.Package], pkv.Version)
	if err != nil {
		return err
	}
	// The namespaced kinds only: the legacy cluster-scoped ones convert
	// through the provider's webhook, which nothing here serves.
	pkCRDs, err := filepath.Glob(filepath.Join(pk, "package", "crds", "kubernetes.m.crossplane.io_*.yaml"))
	if err != nil {
		return errors.Wrap(err, "cannot list provider-kubernetes' CRDs")
	}
	crds := append([]string{capi, filepath.Join(envtest.RepoRoot(), "config", "crd", "bases")}, pkCRDs...)
	if p.mgmt, err = envtest.StartManagement(crds...); err != nil {
		return err
	}
	scheme := envtest.NewScheme()
	if err := pkgv1.AddToScheme(scheme); err != nil {
		return errors.Wrap(err, "cannot add Crossplane's package types to the scheme")
	}
	if p.client, err = client.New(p.mgmt.Config, client.Options{Scheme: scheme}); err != nil {
		return errors.Wrap(err, "cannot create the management cluster's client")
	}
	kc, err := p.mgmt.AdminKubeconfig("capxp-plane")
	if err != nil {
		return err
	}
	p.kubeconfig = filepath.Join(p.dir, "management.kubeconfig")
	return errors.Wrap(os.WriteFile(p.kubeconfig, kc, 0o600), "cannot write the management kubeconfig")
}

func (p *Plane) startWorkload(_ context.Context) error {
	var err error
	if p.Workload, err = envtest.StartWorkload(); err != nil {
		return err
	}
	return errors.Wrap(os.WriteFile(filepath.Join(p.dir, "workload.kubeconfig"), p.Workload.Kubeconfig, 0o600), "cannot write the workload kubeconfig")
}

// startControllerManager runs kube-controller-manager's garbage collector
// (composed resources are owned by their XRs) and namespace controller.
func (p *Plane) startControllerManager(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	assets, err := envtest.AssetsDir()
	if err != nil {
		return err
	}
	proc, err := startProcess(p.dir, "kube-controller-manager", filepath.Join(assets, "kube-controller-manager"), nil,
		"--kubeconfig="+p.kubeconfig, "--authentication-kubeconfig="+p.kubeconfig, "--authorization-kubeconfig="+p.kubeconfig,
		"--controllers=garbage-collector-controller,namespace-controller",
		"--leader-elect=false", "--use-service-account-credentials=false",
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir="+filepath.Join(p.dir, "kube-controller-manager"))
	if err != nil {
		return err
	}
	p.procs = append(p.procs, proc)
	return proc.waitFor(ctx, time.Minute, func() bool { return dialable(hostPort(port)) })
}

// readVersions reads the versions the plane runs.
func readVersions() (versions, error) {
	var v versions
	var err error
	if v.crossplane, err = envtest.Required(envtest.CrossplaneModule); err != nil {
		return v, err
	}
	if v.functions, err = packages.Dependencies("Function"); err != nil {
		return v, err
	}
	v.providerKubernetes, err = packages.Find(providerKubernetes)
	return v, err
}

// providerKubernetes is the package of the provider the local backend
// composes with.
const providerKubernetes = "xpkg.crossplane.io/crossplane-contrib/provider-kubernetes"
