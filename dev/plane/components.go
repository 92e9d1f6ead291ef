package plane

import (
	"context"
	_ "embed"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/dev/localkube"
)

// dialable reports whether something accepts TCP connections at addr.
func dialable(addr string) bool {
	c, err := (&net.Dialer{Timeout: time.Second}).DialContext(context.Background(), "tcp", addr)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// startProviderKubernetes runs provider-kubernetes against the management
// cluster. Its conversion webhook for the legacy cluster-scoped kinds needs a
// serving certificate even though nothing calls it here.
func (p *Plane) startProviderKubernetes(ctx context.Context) error {
	if p.opts.Release != "" {
		return nil
	}
	ca, err := newAuthority("provider-kubernetes-webhook")
	if err != nil {
		return err
	}
	certs := filepath.Join(p.dir, "tls", providerKubernetesProcess)
	if err := ca.serve(certs, providerKubernetesProcess); err != nil {
		return err
	}
	proc, err := p.runProviderKubernetes(ctx, certs)
	if err != nil {
		return err
	}
	p.procs = append(p.procs, proc)
	return nil
}

// runProviderKubernetes runs provider-kubernetes with the webhook
// certificate in certs and waits until it is ready.
func (p *Plane) runProviderKubernetes(ctx context.Context, certs string) (*process, error) {
	health, err := freePort()
	if err != nil {
		return nil, err
	}
	// v1.2.1 has no flags for its metrics (:8080) and webhook (:9443)
	// listeners: they must be free.
	for _, addr := range []string{"127.0.0.1:8080", "127.0.0.1:9443"} {
		if dialable(addr) {
			return nil, errors.Errorf("provider-kubernetes needs port %s, which another process uses", addr[len("127.0.0.1:"):])
		}
	}
	proc, err := startProcess(p.dir, providerKubernetesProcess, p.inputs.providerKubernetes,
		[]string{"KUBECONFIG=" + p.kubeconfig, "WEBHOOK_TLS_CERT_DIR=" + certs},
		"--health-probe-bind-addr="+hostPort(health), "--poll=30s", "--sync=10m")
	if err != nil {
		return nil, err
	}
	if err := proc.waitHealthy(ctx, fmt.Sprintf("http://%s/readyz", hostPort(health)), 2*time.Minute); err != nil {
		proc.stop(10 * time.Second)
		return nil, err
	}
	return proc, nil
}

// StopProviderKubernetes stops the plane's provider-kubernetes as an
// upgrade or an eviction would; StartProviderKubernetes starts it again. Two
// planes on one machine cannot run it at once: v1.2.1 listens on fixed
// ports (8080, 9443).
func (p *Plane) StopProviderKubernetes() {
	for _, proc := range p.procs {
		if proc.name == providerKubernetesProcess {
			proc.stop(30 * time.Second)
		}
	}
}

// StartProviderKubernetes starts provider-kubernetes again after
// StopProviderKubernetes, and waits until it is ready.
func (p *Plane) StartProviderKubernetes(ctx context.Context) error {
	for i, proc := range p.procs {
		if proc.name != providerKubernetesProcess {
			continue
		}
		if done, _ := proc.exited(); !done {
			return errors.New("provider-kubernetes is running")
		}
		again, err := p.runProviderKubernetes(ctx, filepath.Join(p.dir, "tls", providerKubernetesProcess))
		if err != nil {
			return err
		}
		p.procs[i] = again
		return nil
	}
	return errors.New("the plane runs no provider-kubernetes of its own")
}

// providerKubernetesProcess names the provider-kubernetes process.
const providerKubernetesProcess = "provider-kubernetes"

// startCAPI runs CAPI's Cluster, Machine, MachineSet, MachineDeployment,
// MachinePool and MachineHealthCheck reconcilers in this process, as CAPI's
// manager configures them, with its ClusterTopology feature (ClusterClasses)
// and the kubeadm bootstrap and control plane providers, and the plane's
// stand-ins for kubeadm and the kubelet on the hosts and for the cloud's
// auto scaling groups.
func (p *Plane) startCAPI(ctx context.Context) error {
	// In-process controllers log through controller-runtime's logger, to a
	// file beside the other components' logs.
	f, err := os.OpenFile(filepath.Join(p.dir, "capi.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return errors.Wrap(err, "cannot create CAPI's log")
	}
	ctrllog.SetLogger(zap.New(zap.WriteTo(f)))
	opts := []localkube.CAPIOption{localkube.WithClusterTopology(), localkube.WithKubeadm(), localkube.WithFeatureGates(p.opts.CAPIFeatureGates...)}
	if p.opts.InPlaceUpdates {
		if err := p.startCAPIProcesses(ctx); err != nil {
			return err
		}
		opts = []localkube.CAPIOption{localkube.WithoutCore(), localkube.WithKubeadmBootstrap()}
	}
	if p.capi, err = p.mgmt.StartCAPI(ctx, opts...); err != nil {
		return err
	}
	if err := p.standInForKubelets(p.capi.Manager); err != nil {
		return err
	}
	if err := p.standInForAutoScaling(p.capi.Manager); err != nil {
		return err
	}
	return p.standInForKubeadm(p.capi.Manager)
}

// The processes of CAPI's controller managers the plane runs from CAPI's
// binaries.
const (
	capiCoreProcess = "capi-controller-manager"
	capiKCPProcess  = "capi-kubeadm-control-plane-controller-manager"
)

// startCAPIProcesses runs CAPI's core and KubeadmControlPlane controller
// managers from CAPI's binaries, with the RuntimeSDK and InPlaceUpdates
// features, so that both call CAPXP's in-place update hooks: the core's
// MachineDeployments ask CanUpdateMachineSet, KubeadmControlPlane asks
// CanUpdateMachine, and the core's Machines call UpdateMachine. They reach
// an extension registered by Service through the plane's Services' proxy
// (startServiceProxy), as they would through a cluster's DNS.
func (p *Plane) startCAPIProcesses(ctx context.Context) error {
	gates := []string{"ClusterTopology=true", "MachinePool=true", "RuntimeSDK=true", "InPlaceUpdates=true"}
	for _, g := range p.opts.CAPIFeatureGates {
		gates = append(gates, g+"=true")
	}
	proxy, err := p.startServiceProxy(ctx)
	if err != nil {
		return err
	}
	env := []string{"HTTPS_PROXY=" + proxy}
	if p.inputs.capiWebhooksErr != nil {
		return p.inputs.capiWebhooksErr
	}
	if err := p.startCAPIProcess(ctx, capiCoreProcess, p.inputs.capiCore, p.inputs.capiCoreErr, env, gates,
		"--machine-concurrency=2", "--machineset-concurrency=2", "--machinedeployment-concurrency=2",
		"--cluster-concurrency=2", "--clustertopology-concurrency=2"); err != nil {
		return err
	}
	if err := p.startCAPIProcess(ctx, capiKCPProcess, p.inputs.capiKCP, p.inputs.capiKCPErr, env, gates,
		"--kubeadmcontrolplane-concurrency=2"); err != nil {
		return err
	}
	p.progress("CAPI's core and KubeadmControlPlane controllers run as their own processes, with in-place updates")
	return nil
}

// startCAPIProcess runs one of CAPI's controller manager binaries against
// the management cluster with the given environment (beside its
// kubeconfig), feature gates and flags, and waits
// until it is ready. Its webhooks are registered as it ships them, pointed
// at its webhook server (registerWebhooks). It migrates no CRD: the
// plane installs CAPI's CRDs at the version it runs.
func (p *Plane) startCAPIProcess(ctx context.Context, name, binary string, missing error, env, gates []string, flags ...string) error {
	if missing != nil {
		return missing
	}
	ca, err := newAuthority(name + "-webhook")
	if err != nil {
		return err
	}
	certs := filepath.Join(p.dir, "tls", name)
	if err := ca.serve(certs, name); err != nil {
		return err
	}
	var ports [3]int
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return err
		}
	}
	health, diagnostics, webhook := ports[0], ports[1], ports[2]
	proc, err := startProcess(p.dir, name, binary, append([]string{"KUBECONFIG=" + p.kubeconfig}, env...),
		append([]string{
			"--leader-elect=false",
			"--health-addr=" + hostPort(health),
			"--diagnostics-address=" + hostPort(diagnostics), "--insecure-diagnostics=true",
			fmt.Sprintf("--webhook-port=%d", webhook), "--webhook-cert-dir=" + certs,
			"--feature-gates=" + strings.Join(gates, ","),
			"--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields",
		}, flags...)...)
	if err != nil {
		return err
	}
	if err := proc.waitHealthy(ctx, fmt.Sprintf("http://%s/readyz", hostPort(health)), 2*time.Minute); err != nil {
		proc.stop(10 * time.Second)
		return err
	}
	p.procs = append(p.procs, proc)
	if file, ok := capiWebhookFiles[name]; ok {
		caPEM, err := os.ReadFile(filepath.Join(certs, tlsCA))
		if err != nil {
			return errors.Wrapf(err, "cannot read the CA of %s's webhooks", name)
		}
		return p.registerWebhooks(ctx, name, filepath.Join(p.inputs.capiWebhooks, file), "https://"+hostPort(webhook), caPEM)
	}
	return nil
}

// capiWebhookFiles are the webhook configurations of CAPI's processes, in
// the staged folder (inputs.capiWebhooks).
var capiWebhookFiles = map[string]string{
	capiCoreProcess: "core.yaml",
	capiKCPProcess:  "kubeadm-control-plane.yaml",
}

// startManager runs the capxp binary's manager against the management
// cluster, as a platform team would deploy it.
func (p *Plane) startManager(ctx context.Context) error {
	if p.opts.Clusterctl || p.opts.Release != "" {
		p.progress("left to clusterctl")
		return nil
	}
	var webhook []string
	if p.opts.InPlaceUpdates {
		var err error
		if webhook, err = p.managerWebhook(); err != nil {
			return err
		}
	}
	m, err := p.StartManager(ctx, "capxp-manager", webhook...)
	if err != nil {
		return err
	}
	p.manager = m.proc
	p.managerMetrics, p.managerProfiler = m.MetricsURL, m.ProfilerURL
	return nil
}

// managerWebhook returns the manager's arguments for a webhook server the
// API server and CAPI call at a loopback URL, with a certificate of its own
// CA: the credentials webhook and the in-place update hooks, which the
// manager registers with that URL and CA.
func (p *Plane) managerWebhook() ([]string, error) {
	ca, err := newAuthority("capxp-webhook")
	if err != nil {
		return nil, err
	}
	certs := filepath.Join(p.dir, "tls", "capxp-manager")
	if err := ca.serve(certs, "capxp-manager"); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return []string{fmt.Sprintf("--webhook-port=%d", port), "--webhook-cert-dir=" + certs,
		"--webhook-url=https://" + hostPort(port), "--webhook-ca-bundle-file=" + filepath.Join(certs, tlsCA)}, nil
}

// Manager is a `capxp manager` process the plane runs.
type Manager struct {
	proc *process
	// MetricsURL and ProfilerURL are its Prometheus and pprof endpoints
	// (plain HTTP, on the loopback interface).
	MetricsURL, ProfilerURL string
}

// StartManager runs one more `capxp manager` against the management
// cluster, its log in name.log of the plane's directory, with extra
// arguments (say, --leader-elect), and waits until it is ready. The plane
// stops it with the others. It is how tests run replicas, and restart a
// manager they killed.
func (p *Plane) StartManager(ctx context.Context, name string, extra ...string) (*Manager, error) {
	if p.opts.ManagerBinary == "" {
		return nil, errors.New("no capxp binary to run the manager from")
	}
	var ports [3]int
	for i := range ports {
		var err error
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	health, metrics, profiler := ports[0], ports[1], ports[2]
	// Metrics and pprof over plain HTTP, on the loopback interface only.
	args := append([]string{"manager", "--kubeconfig=" + p.kubeconfig, "--diagnostics-address=" + hostPort(metrics), "--insecure-diagnostics",
		"--health-addr=" + hostPort(health), "--profiler-address=" + hostPort(profiler)}, extra...)
	proc, err := startProcess(p.dir, name, p.opts.ManagerBinary, nil, args...)
	if err != nil {
		return nil, err
	}
	p.extraManagers = append(p.extraManagers, proc)
	m := &Manager{proc: proc,
		MetricsURL:  fmt.Sprintf("http://%s/metrics", hostPort(metrics)),
		ProfilerURL: fmt.Sprintf("http://%s/debug/pprof/", hostPort(profiler))}
	// Ready once its health endpoint answers: a replica waiting for the
	// lease is live and ready too.
	return m, proc.waitHealthy(ctx, fmt.Sprintf("http://%s/readyz", hostPort(health)), time.Minute)
}

// Kill kills the manager outright (SIGKILL), as the kernel's OOM killer
// would, and waits until it is gone.
func (m *Manager) Kill() { m.proc.kill() }

// Stop stops the manager as Kubernetes stops a pod (SIGTERM, then SIGKILL
// after 30 s) and waits until it is gone.
func (m *Manager) Stop() { m.proc.stop(30 * time.Second) }

// Exited reports whether the manager has ended, and how.
func (m *Manager) Exited() (bool, error) { return m.proc.exited() }

// Log is the path of the manager's log.
func (m *Manager) Log() string { return m.proc.log }

// KillManager kills the plane's own manager outright (SIGKILL) and waits
// until it is gone; RestartManager starts it again.
func (p *Plane) KillManager() {
	if p.manager != nil {
		p.manager.kill()
	}
}

// RestartManager starts the plane's own manager again after KillManager,
// with the same arguments, and waits until it is ready.
func (p *Plane) RestartManager(ctx context.Context) error {
	if p.manager != nil {
		if done, _ := p.manager.exited(); !done {
			return errors.New("the manager is running")
		}
	}
	return p.startManager(ctx)
}

// install applies CAPXP's XRDs and the Compositions the local plane can run
// (local and byo, and aws with Options.AWSCRDs or AWS), and waits until Crossplane
// serves the XR kinds and has accepted the Compositions.
func (p *Plane) install(ctx context.Context) error {
	objs, err := compositions.ReadDir("xrds")
	if err != nil {
		return err
	}
	xrds := len(objs)
	backends := []string{"local", "byo"}
	if p.opts.AWSCRDs || p.opts.AWS {
		backends = append(backends, "aws")
	}
	for _, b := range backends {
		c, err := compositions.ReadDir(b)
		if err != nil {
			return err
		}
		objs = append(objs, c...)
	}
	for _, o := range objs {
		if err := p.client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return errors.Wrapf(err, "cannot create %s %s", o.GetKind(), o.GetName())
		}
	}
	for _, x := range objs[:xrds] {
		name := x.GetName()
		if err := p.xp.core.waitFor(ctx, 2*time.Minute, func() bool {
			xrd := &xpextv1.CompositeResourceDefinition{}
			crd := &extv1.CustomResourceDefinition{}
			return p.client.Get(ctx, client.ObjectKey{Name: name}, xrd) == nil &&
				xrd.Status.GetCondition(xpextv1.TypeEstablished).Status == "True" &&
				p.client.Get(ctx, client.ObjectKey{Name: name}, crd) == nil
		}); err != nil {
			return errors.Wrapf(err, "XRD %s was not established", name)
		}
	}
	return nil
}

// recordCAPI records the CAPI providers the plane runs (core, and kubeadm's
// bootstrap and control plane providers) in clusterctl's inventory, as
// `clusterctl init --bootstrap kubeadm --control-plane kubeadm` would have:
// clusterctl then installs infrastructure providers beside them, checks
// their contract against CAPI's, and moves the kinds of each, rather than
// installing them (their Deployments nothing would run here).
func (p *Plane) recordCAPI(ctx context.Context) error {
	version, err := capxp.RequiredVersion(capiModule)
	if err != nil {
		return err
	}
	providers := []kubeadmProvider{{name: "cluster-api", kind: "CoreProvider", namespace: CAPINamespace}}
	for _, group := range slices.Sorted(maps.Keys(kubeadmProviders)) {
		providers = append(providers, kubeadmProviders[group])
	}
	for _, pr := range providers {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pr.namespace}}
		if err := p.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return errors.Wrapf(err, "cannot create %s's namespace", pr.name)
		}
		inv := &unstructured.Unstructured{}
		inv.SetGroupVersionKind(schema.GroupVersionKind{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Kind: "Provider"})
		inv.SetNamespace(pr.namespace)
		inv.SetName(pr.name)
		inv.SetLabels(map[string]string{
			"cluster.x-k8s.io/provider":        pr.name,
			"clusterctl.cluster.x-k8s.io":      "",
			"clusterctl.cluster.x-k8s.io/core": "inventory",
		})
		inv.Object["providerName"] = strings.TrimPrefix(strings.TrimPrefix(pr.name, "bootstrap-"), "control-plane-")
		inv.Object["type"] = pr.kind
		inv.Object["version"] = version
		if err := p.client.Create(ctx, inv); err != nil && !apierrors.IsAlreadyExists(err) {
			return errors.Wrapf(err, "cannot record %s in clusterctl's inventory", pr.name)
		}
	}
	return nil
}

// CAPINamespace is where clusterctl would have installed CAPI.
const CAPINamespace = "capi-system"

// kubeadmProvider is a CAPI provider as clusterctl's inventory names it.
type kubeadmProvider struct{ name, kind, namespace string }

// kubeadmProviders are the kubeadm providers the plane runs, by the API
// group of their kinds.
var kubeadmProviders = map[string]kubeadmProvider{
	bootstrapv1.GroupVersion.Group:    {name: "bootstrap-kubeadm", kind: "BootstrapProvider", namespace: "capi-kubeadm-bootstrap-system"},
	controlplanev1.GroupVersion.Group: {name: "control-plane-kubeadm", kind: "ControlPlaneProvider", namespace: "capi-kubeadm-control-plane-system"},
}

// StopCrossplaneCore stops Crossplane core (not its functions) as an
// upgrade or an eviction would: nothing composes until StartCrossplaneCore.
func (p *Plane) StopCrossplaneCore() { p.xp.core.stop(30 * time.Second) }

// StartCrossplaneCore starts Crossplane core again, with the same
// arguments, and waits until it is healthy.
func (p *Plane) StartCrossplaneCore(ctx context.Context) error {
	core, err := p.xp.core.restart()
	if err != nil {
		return err
	}
	for i, proc := range p.xp.procs {
		if proc == p.xp.core {
			p.xp.procs[i] = core
		}
	}
	p.xp.core = core
	return core.waitHealthy(ctx, p.xp.coreHealth, 2*time.Minute)
}

// Crashed names each process of the plane that ended although nothing
// stopped or killed it, and how: none while the plane runs as it should.
func (p *Plane) Crashed() []string {
	all := append(append([]*process{}, p.procs...), p.extraManagers...)
	if p.xp != nil {
		all = append(all, p.xp.procs...)
	}
	var ended []string
	for _, proc := range all {
		if done, err := proc.crashed(); done {
			ended = append(ended, fmt.Sprintf("%s (%v, log %s)", proc.name, err, proc.log))
		}
	}
	return ended
}

// kwokProcess is kwok's name among the plane's processes.
const kwokProcess = "kwok"

// podDeleteStages are the plane's stages for deleted Pods (kwok/pod-delete.yaml).
//
//go:embed kwok/pod-delete.yaml
var podDeleteStages []byte

// planeStages are the kwok stages the plane runs in place of kwok's own of
// the same file name.
var planeStages = map[string][]byte{"pod-delete.yaml": podDeleteStages}

// startKwok runs kwok against the workload cluster's API server, in place of
// the kubelets its Nodes stand for: every Node there is simulated, so kwok
// manages them all. Nodes initialize and go Ready, heartbeat, and run the
// pods bound to them; a Node labelled node-not-ready.stage.kwok.x-k8s.io:
// "true" goes NotReady (kwok's chaos stage), as a failed host would. Nodes
// get kwok's server as their kubelet (address 127.0.0.1, its port), so the
// workload API server's port-forwards to their Pods reach kwok, which
// forwards the kube-apiserver Pods' port (serveAPIServerPods). A deleted
// Pod that a finalizer holds terminates (Succeeded) and stays until the
// finalizer goes (the plane's pod-delete stages, planeStages). A plane
// given another's workload cluster (Options.Workload) leaves its Nodes to
// the kwok of the plane that started it.
func (p *Plane) startKwok(ctx context.Context) error {
	if p.opts.Workload != nil {
		return nil
	}
	stages, err := filepath.Glob(filepath.Join(p.inputs.kwokStages, "*.yaml"))
	if err != nil {
		return errors.Wrap(err, "cannot list kwok's stages")
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	forward, err := p.serveAPIServerPods()
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + filepath.Join(p.dir, "workload.kubeconfig"),
		"--manage-all-nodes=true",
		"--server-address=" + hostPort(port),
		"--node-ip=127.0.0.1",
		fmt.Sprintf("--node-port=%d", port),
		"--config=" + forward,
	}
	for _, s := range stages {
		// The plane's own stages replace kwok's of the same file name.
		if _, ok := planeStages[filepath.Base(s)]; !ok {
			args = append(args, "--config="+s)
		}
	}
	for name, stage := range planeStages {
		f := filepath.Join(p.dir, "kwok-"+name)
		if err := os.WriteFile(f, stage, 0o600); err != nil {
			return errors.Wrap(err, "cannot write the plane's kwok stages")
		}
		args = append(args, "--config="+f)
	}
	proc, err := startProcess(p.dir, kwokProcess, p.inputs.kwok, []string{"HOME=" + p.dir}, args...)
	if err != nil {
		return err
	}
	p.procs = append(p.procs, proc)
	return proc.waitHealthy(ctx, fmt.Sprintf("http://%s/healthz", hostPort(port)), time.Minute)
}
