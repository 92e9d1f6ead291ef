// Package plane runs CAPXP's local management plane, with nothing faked:
// etcd and kube-apiserver for the management cluster and a second API server
// as the local workload cluster, kube-controller-manager for garbage
// collection (and the workload cluster's controllers and scheduler),
// Crossplane core with the composition functions as local
// processes behind mutual TLS, provider-kubernetes for the local backend,
// CAPI's core controllers, and the CAPXP manager binary. Everything listens on
// loopback, starts in dependency order with readiness checks, and stops in
// reverse order leaving no process behind; every child process also dies
// with the plane's process if that is killed outright (see package
// lifeline). cmd/capxp-dev and the end-to-end tests run on it;
// StartCrossplane runs Crossplane alone against any API server.
//
// The plane needs no checkout: CAPXP's own manifests are embedded, and the
// binaries and other projects' CRDs come from a tools directory that
// hack/ensure-tools.sh fills (see package tools).
package plane

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers"
	"github.com/capxp/cluster-api-provider-crossplane/dev/lifeline"
	"github.com/capxp/cluster-api-provider-crossplane/dev/localkube"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
)

// PackageInstall is what InstallConfiguration installs with: the
// administrator's kubeconfig, the reference of the release's Configuration
// package (its own registry's name, which the plane's ImageConfigs rewrite
// to the plane's registry), and that registry (to push to, with its CA).
type PackageInstall struct {
	Kubeconfig string
	Ref        string
	Registry   *Registry
}

// Options configure a plane.
type Options struct {
	// Dir holds the plane's logs, certificates, kubeconfigs and package
	// cache. A new temporary directory when empty; kept after Stop.
	Dir string
	// ManagerBinary is the capxp binary run as the CAPXP manager and by
	// StartManager. With Release, the bridge runs from its package's image
	// instead (the release's binary, the new one's after an upgrade).
	ManagerBinary string
	// Tools is the directory hack/ensure-tools.sh filled with the
	// components' binaries and CRDs; tools.Default() when empty.
	Tools tools.Dir
	// Clusterctl leaves CAPXP's provider to clusterctl: the plane installs
	// neither CAPXP's CRDs nor its manager, and a test installs them with
	// `clusterctl init` and runs the manager with RunDeployment. CAPXP's
	// XRDs and Compositions are installed either way: applied by the plane,
	// or, with Release, from the release's Compositions Configuration
	// package (and its dependencies), as docs/install.md's clusterctl path
	// does.
	Clusterctl bool
	// Release is the folder of a `make release` whose Crossplane packages
	// the plane installs CAPXP from, as a platform would with Crossplane's
	// package manager: the plane serves them, and every package they depend
	// on, from an OCI registry on loopback (TLS, its CA trusted by
	// Crossplane), points Crossplane at it with ImageConfigs, applies the
	// release's crossplane-setup.yaml, and runs what Crossplane installs
	// (see packageRuntime). It installs neither CAPXP's CRDs, XRDs and
	// Compositions, nor provider-kubernetes' CRDs, nor the manager:
	// the packages bring them. InstallConfiguration installs the
	// Configuration.
	Release string
	// InstallConfiguration installs the Configuration package (in package
	// mode) as a platform does, and returns the reference it installed:
	// the release's own (given), or the same package pushed to the plane's
	// registry under another name. The plane creates the Configuration
	// itself when nil.
	InstallConfiguration func(ctx context.Context, in PackageInstall) (string, error)
	// Bare, with Release, leaves all of CAPXP to its user, as a management
	// cluster is before a platform follows docs/install.md: the plane
	// starts Crossplane, CAPI (recorded in clusterctl's inventory, its
	// providers' metadata in ClusterctlConfig) and the registry, points
	// Crossplane at the registry, and runs what the user installs (the
	// packages Crossplane installs, and the Deployment clusterctl installs
	// in capxp-system, ServeDeployments); it applies neither
	// crossplane-setup.yaml nor any Configuration.
	Bare bool
	// Workload, when set, is the workload cluster's API server to use: one
	// that another plane started, so that two planes (a bootstrap and a
	// permanent management cluster) provision into the same "cloud". The
	// plane does not stop it.
	Workload *localkube.Workload
	// AuditWorkload makes the workload API server (when the plane starts
	// it) log every write with its request (see WorkloadAuditLog).
	AuditWorkload bool
	// AWSCRDs installs, in clusterctl or plain mode, the CRDs of the kinds
	// CAPXP's aws Compositions compose and of AWS ProviderConfigs, from
	// the AWS family's staged package (hack/ensure-tools.sh provider-aws).
	// No AWS provider runs here (unless AWS): a test that composes them
	// plays its part.
	AWSCRDs bool
	// AWS runs the AWS family's providers (their runtimes built with
	// hack/ensure-tools.sh provider-aws-runtime) against an AWS API
	// emulator, moto_server, that the plane runs on loopback
	// (AWSEndpoint). In package mode they are the Configuration's
	// dependencies, run by the package runtime; without AWS the family is
	// installed and not run. In clusterctl mode the plane installs their
	// CRDs (as AWSCRDs does) and runs them itself, as a platform team
	// installs the providers its Compositions use.
	AWS bool
	// AWSEndpoint, with AWS, is an AWS API emulator another plane runs,
	// so that two planes (a bootstrap and a permanent management cluster)
	// provision into the same account. The plane does not stop it.
	AWSEndpoint string
	// AuditManagement makes the management API server log every write with
	// its request (see ManagementAuditLog).
	AuditManagement bool
	// CAPIFeatureGates are CAPI feature gates to enable by name (for
	// example MachineTaintPropagation), as clusterctl's EXP_* variables
	// enable them for CAPI's managers.
	CAPIFeatureGates []string
	// InPlaceUpdates runs CAPI's core and KubeadmControlPlane controllers
	// as CAPI ships them, each its own process (hack/ensure-tools.sh
	// capi-core capi-kcp), with their RuntimeSDK and InPlaceUpdates
	// features on, so that they call runtime extensions: CAPXP's in-place
	// update hooks, which the manager registers. CAPI's Runtime SDK client
	// is internal to CAPI's module, so the in-process controllers cannot
	// call extensions. The kubeadm bootstrap provider stays in-process.
	InPlaceUpdates bool
	// Progress receives a line per step; nil discards them.
	Progress func(format string, args ...any)
}

// Plane is a running local management plane.
type Plane struct {
	opts   Options
	dir    string
	inputs inputs

	mgmt *localkube.Environment
	// client reaches the management cluster as an administrator and knows
	// Crossplane's package types too.
	client client.Client
	// kubeconfig is the administrator's kubeconfig file of the management
	// cluster, for the components run as processes.
	kubeconfig string
	// Workload is the workload cluster's API server.
	Workload *localkube.Workload
	capi     *localkube.CAPI
	xp       *Crossplane
	procs    []*process
	manager  *process
	// extraManagers are every manager StartManager started (the plane's
	// own among them).
	extraManagers []*process
	// pods are the pods the plane runs as local processes, for the
	// Services that select them (ServiceAddress).
	pods localPods
	// serviceProxy takes the plane's processes to Services by their DNS
	// names (startServiceProxy).
	serviceProxy *http.Server
	// registry serves the packages, runtime runs them (package mode).
	registry *Registry
	runtime  *packageRuntime
	mirrored []mirrored
	// managerMetrics is the manager's Prometheus endpoint, managerProfiler
	// its pprof endpoints.
	managerMetrics, managerProfiler string
	// awsEndpoint is the AWS API emulator's URL (Options.AWS).
	awsEndpoint string
	// apiServerPods serves the workload's kube-apiserver Pods' port
	// (serveAPIServerPods).
	apiServerPods *http.Server
	// stopKubelet ends ServeDeployments (Options.Bare); kubeletDone is
	// closed once it has.
	stopKubelet context.CancelFunc
	kubeletDone chan struct{}
}

// ManagerProfilerURL is where the manager serves Go's pprof endpoints
// (plain HTTP, on the loopback interface).
func (p *Plane) ManagerProfilerURL() string { return p.managerProfiler }

// ManagerMetricsURL is where the manager serves its metrics, on the
// loopback interface: plain HTTP when the plane runs the manager itself;
// HTTPS, authenticated and authorized with the API server, when it runs as
// the bridge package's pod (Options.Release), as the Deployment serves it.
func (p *Plane) ManagerMetricsURL() string {
	if p.managerMetrics == "" && p.runtime != nil {
		p.runtime.mu.Lock()
		defer p.runtime.mu.Unlock()
		return p.runtime.bridgeMetrics
	}
	return p.managerMetrics
}

// Management is the management cluster's API server.
func (p *Plane) Management() *localkube.Environment { return p.mgmt }

// Kubeconfig is the path of the management cluster's administrator
// kubeconfig.
func (p *Plane) Kubeconfig() string { return p.kubeconfig }

// ManagementAuditLog is the management API server's audit log of writes
// (JSON lines), when Options.AuditManagement is set.
func (p *Plane) ManagementAuditLog() string { return filepath.Join(p.dir, "management-audit.log") }

// Dir is where the plane keeps logs and state.
func (p *Plane) Dir() string { return p.dir }

// WorkloadAuditLog is where the workload API server logs every write, with
// Options.AuditWorkload (Kubernetes' audit log, JSON lines).
func (p *Plane) WorkloadAuditLog() string { return filepath.Join(p.dir, "workload-audit.log") }

func (p *Plane) progress(format string, args ...any) {
	if p.opts.Progress != nil {
		p.opts.Progress(format, args...)
	}
}

// Check reports everything the plane would miss in a tools directory and
// the manager binary (when not empty), in one error that says how to stage
// it; nil when nothing is missing.
func Check(o Options) error {
	_, err := resolve(o)
	return err
}

// resolve finds every input of the plane or says what is missing.
func resolve(o Options) (inputs, error) {
	if o.Tools == "" {
		o.Tools = tools.Default()
	}
	in, err := resolveInputs(o.Tools)
	if o.Release != "" {
		var cerr error
		if in.crossplaneCLI, cerr = o.Tools.Binary("crossplane-cli", CrossplaneCLIVersion); cerr != nil {
			err = tools.Missing(err, cerr)
		}
		if _, serr := os.Stat(o.Release); serr != nil {
			err = tools.Missing(err, errors.Errorf("the release %s is missing: build it with `make release`", o.Release))
		}
	}
	if o.AWS {
		var aerr error
		if o.Release == "" && !o.Clusterctl {
			err = tools.Missing(err, errors.New("the AWS family runs as packages or beside clusterctl's providers: give a release, or set Clusterctl"))
		}
		if in.awsRuntimes, in.moto, aerr = awsRuntimes(o.Tools); aerr != nil {
			err = tools.Missing(err, aerr)
		}
	}
	if o.AWSCRDs || (o.AWS && o.Clusterctl) {
		var aerr error
		if in.awsCRDs, aerr = awsCRDs(o.Tools); aerr != nil {
			err = tools.Missing(err, aerr)
		}
	}
	if o.ManagerBinary != "" {
		if _, serr := os.Stat(o.ManagerBinary); serr != nil {
			err = tools.Missing(err, errors.Errorf("the capxp binary %s, run as the CAPXP manager, is missing: build it with `go build -o %s ./cmd/capxp` in a CAPXP checkout (`make dev` runs out/bin/capxp, which `make release` builds), or name another with --manager-binary",
				o.ManagerBinary, o.ManagerBinary))
		}
	}
	return in, err
}

// Start starts every component in dependency order. It first checks that
// every input is there and reports all that are missing at once. On error it
// stops what it started.
func Start(ctx context.Context, o Options) (*Plane, error) {
	if o.Tools == "" {
		o.Tools = tools.Default()
	}
	if o.ManagerBinary == "" && !o.Clusterctl && o.Release == "" {
		return nil, errors.New("no capxp binary to run the manager from")
	}
	if o.Bare && o.Release == "" {
		return nil, errors.New("a bare plane serves a release's dependencies: give a release")
	}
	in, err := resolve(o)
	if err != nil {
		return nil, err
	}
	p := &Plane{opts: o, dir: o.Dir, inputs: in}
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
	type stepT struct {
		what string
		f    func(context.Context) error
	}
	steps := []stepT{
		{"the management cluster (etcd, kube-apiserver)", p.startManagement},
		{"the workload cluster (etcd, kube-apiserver)", p.startWorkload},
		{"kwok (the workload cluster's Nodes)", p.startKwok},
		{"kube-controller-manager (garbage collection; the workload's Nodes, Deployments and disruption budgets) and the workload's kube-scheduler", p.startControllerManager},
		// provider-kubernetes before the functions: it cannot move its
		// metrics listener off :8080, where the functions' SDK also tries
		// (and, unlike the provider, tolerates failing).
		{"provider-kubernetes", p.startProviderKubernetes},
		{"Crossplane core and the composition functions", p.startCrossplane},
		{"CAPI's core controllers", p.startCAPI},
		{"the CAPXP manager", p.startManager},
		{"clusterctl's record of CAPI", p.recordCAPI},
		{"CAPXP's XRDs and Compositions", p.install},
	}
	if p.opts.AWS && p.opts.Release == "" {
		steps = append(steps[:4:4], append([]stepT{
			{"the AWS API emulator (moto_server)", p.startAWSEmulator},
			{"the AWS family's providers", p.startAWSProviders},
		}, steps[4:]...)...)
	}
	if p.opts.Release != "" {
		steps = []stepT{
			steps[0], steps[1], steps[2], steps[3],
			{"the package registry", p.startRegistry},
			steps[5], steps[6], steps[8],
			{"CAPXP's Configuration package and its dependencies", p.installPackages},
		}
		if p.opts.Bare {
			steps[len(steps)-1] = stepT{"the package runtime and a kubelet for capxp-system's Deployment (no part of CAPXP)", p.serveBare}
		}
		if p.opts.AWS {
			steps = append(steps[:4:4], append([]stepT{{"the AWS API emulator (moto_server)", p.startAWSEmulator}}, steps[4:]...)...)
		}
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
	if p.stopKubelet != nil {
		p.stopKubelet()
		<-p.kubeletDone
	}
	if p.runtime != nil {
		p.runtime.stop()
	}
	if p.manager != nil {
		p.manager.stop(30 * time.Second)
	}
	for _, m := range p.extraManagers {
		m.stop(30 * time.Second)
	}
	if p.capi != nil {
		_ = p.capi.Stop()
	}
	if p.xp != nil {
		p.xp.Stop()
	}
	for i := len(p.procs) - 1; i >= 0; i-- {
		p.procs[i].stop(30 * time.Second)
	}
	if p.serviceProxy != nil {
		_ = p.serviceProxy.Close()
	}
	if p.registry != nil {
		p.registry.Stop()
	}
	if p.apiServerPods != nil {
		_ = p.apiServerPods.Close()
	}
	if p.Workload != nil && p.opts.Workload == nil {
		_ = p.Workload.Stop()
	}
	if p.mgmt != nil {
		_ = p.mgmt.Stop()
	}
}

// apiServer is how the plane starts an API server: from the tools
// directory's assets, through links that tie etcd and kube-apiserver to this
// process when the program called lifeline.Main.
func (p *Plane) apiServer(name string) (localkube.Options, error) {
	o := localkube.Options{Assets: p.inputs.assets, StopTimeout: 2 * time.Minute}
	links := filepath.Join(p.dir, "bin", name)
	var err error
	if o.Etcd, err = lifeline.Wrap(links, filepath.Join(p.inputs.assets, "etcd")); err != nil {
		return o, err
	}
	if o.APIServer, err = lifeline.Wrap(links, filepath.Join(p.inputs.assets, "kube-apiserver")); err != nil {
		return o, err
	}
	return o, nil
}

func (p *Plane) startManagement(_ context.Context) error {
	o, err := p.apiServer("management")
	if err != nil {
		return err
	}
	own, err := ownCRDs()
	if err != nil {
		return err
	}
	o.Scheme = controllers.NewScheme()
	if err := pkgv1.AddToScheme(o.Scheme); err != nil {
		return errors.Wrap(err, "cannot add Crossplane's package types to the scheme")
	}
	if err := pkgv1beta1.AddToScheme(o.Scheme); err != nil {
		return errors.Wrap(err, "cannot add Crossplane's package configuration types to the scheme")
	}
	// CAPI's CRDs as `clusterctl init` installs them: labelled for
	// clusterctl, which finds the kinds it moves by that label.
	if err := bootstrapv1.AddToScheme(o.Scheme); err != nil {
		return errors.Wrap(err, "cannot add the kubeadm bootstrap types to the scheme")
	}
	if err := controlplanev1.AddToScheme(o.Scheme); err != nil {
		return errors.Wrap(err, "cannot add the kubeadm control plane types to the scheme")
	}
	// The ClusterClass reconciler watches runtime extensions.
	if err := runtimev1.AddToScheme(o.Scheme); err != nil {
		return errors.Wrap(err, "cannot add CAPI's runtime extension types to the scheme")
	}
	capiCRDs, err := clusterctlLabelled(p.inputs.capiCRDs, nil)
	if err != nil {
		return err
	}
	// The kubeadm providers' CRDs as clusterctl installs those providers
	// beside CAPI.
	kubeadmCRDs, err := clusterctlLabelled(p.inputs.kubeadmCRDs, func(crd *extv1.CustomResourceDefinition) string {
		return kubeadmProviders[crd.Spec.Group].name
	})
	if err != nil {
		return err
	}
	for _, crd := range kubeadmCRDs {
		// The contract labels their kustomization adds (CAPI's own CRDs
		// need none): ClusterClasses resolve template references by them.
		crd.Labels["cluster.x-k8s.io/v1beta1"] = "v1beta1"
		crd.Labels["cluster.x-k8s.io/v1beta2"] = "v1beta2"
	}
	o.CRDs = append(append(o.CRDs, capiCRDs...), kubeadmCRDs...)
	o.CRDPaths = []string{p.inputs.clusterctlCRDs, p.inputs.certManagerCRDs}
	if p.opts.Release == "" {
		o.CRDPaths = append(o.CRDPaths, p.inputs.providerKubernetesCRDs...)
		o.CRDPaths = append(o.CRDPaths, p.inputs.awsCRDs...)
	}
	if !p.opts.Clusterctl && p.opts.Release == "" {
		o.CRDs = append(o.CRDs, own...)
	}
	if p.opts.AuditManagement {
		o.AuditLog = p.ManagementAuditLog()
	}
	if p.mgmt, err = localkube.Start(o); err != nil {
		return err
	}
	p.client = p.mgmt.Client
	kc, err := p.mgmt.AdminKubeconfig("capxp-plane")
	if err != nil {
		return err
	}
	p.kubeconfig = filepath.Join(p.dir, "management.kubeconfig")
	return errors.Wrap(os.WriteFile(p.kubeconfig, kc, 0o600), "cannot write the management kubeconfig")
}

func (p *Plane) startWorkload(ctx context.Context) error {
	if p.opts.Workload != nil {
		p.Workload = p.opts.Workload
	} else {
		o, err := p.apiServer("workload")
		if err != nil {
			return err
		}
		if p.opts.AuditWorkload {
			o.AuditLog = p.WorkloadAuditLog()
		}
		if p.Workload, err = localkube.StartWorkload(o); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(p.dir, "workload.kubeconfig"), p.Workload.Kubeconfig, 0o600); err != nil {
		return errors.Wrap(err, "cannot write the workload kubeconfig")
	}
	return p.recordControlPlane(ctx)
}

// clusterctlLabelled reads the CRDs of a directory and labels them as
// clusterctl labels the components it installs for a provider: CAPI's core
// provider, or the one provider names.
func clusterctlLabelled(dir string, provider func(*extv1.CustomResourceDefinition) string) ([]*extv1.CustomResourceDefinition, error) {
	crds, err := readCRDs(dir)
	if err != nil {
		return nil, err
	}
	for _, crd := range crds {
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		name := "cluster-api"
		if provider != nil {
			name = provider(crd)
		}
		if name == "" {
			return nil, errors.Errorf("%s: the CRD of %s belongs to no provider the plane knows", dir, crd.Name)
		}
		crd.Labels[infrav1.ClusterctlLabel] = ""
		crd.Labels[infrav1.ProviderLabel] = name
	}
	return crds, nil
}

// startControllerManager runs kube-controller-manager's garbage collector
// (composed resources are owned by their XRs), namespace controller, and
// ClusterRole aggregation (the manager's aggregated role, when it runs with
// the shipped RBAC). On the workload cluster the plane started, it runs the
// controllers a workload cluster needs for the Nodes and the workloads on
// them, and kube-scheduler: node lifecycle (the API server taints every new
// Node not-ready, TaintNodesByCondition, and only that controller lifts the
// taint once the Node is Ready, as on any real cluster), Deployments and
// ReplicaSets, PodDisruptionBudgets' status (which eviction, and so CAPI's
// drain, obeys), the default ServiceAccount a Pod needs to be admitted, and
// garbage collection of Pods and of what owners left.
func (p *Plane) startControllerManager(ctx context.Context) error {
	if err := p.runControllerManager(ctx, "kube-controller-manager", p.kubeconfig,
		"garbage-collector-controller,namespace-controller,clusterrole-aggregation-controller"); err != nil {
		return err
	}
	if p.opts.Workload != nil {
		return nil
	}
	workload := filepath.Join(p.dir, "workload.kubeconfig")
	if err := p.runControllerManager(ctx, "kube-controller-manager-workload", workload, workloadControllers); err != nil {
		return err
	}
	return p.runScheduler(ctx, workload)
}

// workloadControllers are the kube-controller-manager controllers the
// plane's workload cluster runs.
const workloadControllers = "node-lifecycle-controller,deployment-controller,replicaset-controller," +
	"disruption-controller,serviceaccount-controller,garbage-collector-controller,pod-garbage-collector-controller," +
	"namespace-controller"

// runScheduler runs kube-scheduler against the API server of a kubeconfig,
// so that Pods are placed on the simulated Nodes.
func (p *Plane) runScheduler(ctx context.Context, kubeconfig string) error {
	return p.runKubeComponent(ctx, "kube-scheduler-workload", "kube-scheduler", kubeconfig)
}

// runControllerManager runs kube-controller-manager, under a name of the
// plane's processes, with the controllers named, against the API server of
// a kubeconfig.
func (p *Plane) runControllerManager(ctx context.Context, name, kubeconfig, controllers string) error {
	return p.runKubeComponent(ctx, name, "kube-controller-manager", kubeconfig,
		"--controllers="+controllers, "--use-service-account-credentials=false")
}

// runKubeComponent runs a Kubernetes component of the assets directory
// (kube-controller-manager, kube-scheduler), under a name of the plane's
// processes, against the API server of a kubeconfig, serving on a free
// loopback port, without leader election.
func (p *Plane) runKubeComponent(ctx context.Context, name, binary, kubeconfig string, args ...string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	proc, err := startProcess(p.dir, name, filepath.Join(p.inputs.assets, binary), nil, append([]string{
		"--kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + filepath.Join(p.dir, name),
	}, args...)...)
	if err != nil {
		return err
	}
	p.procs = append(p.procs, proc)
	return proc.waitFor(ctx, time.Minute, func() bool { return dialable(hostPort(port)) })
}

// startCrossplane runs Crossplane core and the functions on the management
// cluster.
func (p *Plane) startCrossplane(ctx context.Context) error {
	var err error
	p.xp, err = startCrossplane(ctx, crossplaneRun{
		config:     p.mgmt.Config,
		kubeconfig: p.kubeconfig,
		dir:        p.dir,
		inputs:     p.inputs.crossplane,
		caBundle:   registryCA(p.registry),
		packages:   p.opts.Release != "",
	})
	return err
}
