package plane

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
)

// packageRuntime is the plane's External package runtime: Crossplane core
// runs with --package-runtime=External, so it installs packages (pulls
// them, resolves dependencies, installs CRDs, XRDs and Compositions) but
// runs none; this does what its Deployment runtime would for the packages
// that can run here, with local processes:
//
//   - a Function's revision gets the endpoint and serving certificate of the
//     function's running binary;
//
//   - provider-kubernetes gets a webhook serving certificate, then runs once
//     its revision's CRDs are established;
//
//   - the bridge (CAPXP's Provider package) runs as Crossplane's Deployment
//     runtime would run it: with the identity of the service account its
//     DeploymentRuntimeConfig names (crossplane-setup.yaml), and that
//     configuration's arguments and environment.
//
//   - the AWS family, with Options.AWS, runs against the plane's AWS API
//     emulator (runAWSProvider).
//
// Each running package's revision is marked RuntimeHealthy. Packages whose
// runtime cannot run here (the AWS family without Options.AWS: it would
// call AWS) are left without a runtime, and so are not Healthy.
type packageRuntime struct {
	p      *Plane
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	// running are the processes started, by package name.
	running map[string]*process
	// err is the last error of a package's runtime, by package name.
	errs map[string]error
	// bridgeMetrics is the bridge pod's metrics endpoint, bridgeRevision
	// the ProviderRevision it runs and bridgePackage that revision's
	// package.
	bridgeMetrics, bridgeRevision, bridgePackage string
}

// Packages the plane's runtime runs (by repository name) besides functions.
const (
	providerKubernetesName = "provider-kubernetes"
)

func (p *Plane) startPackageRuntime() {
	ctx, cancel := context.WithCancel(context.Background())
	r := &packageRuntime{p: p, cancel: cancel, done: make(chan struct{}), running: map[string]*process{}, errs: map[string]error{}}
	p.runtime = r
	go func() {
		defer close(r.done)
		for {
			r.reconcile(ctx)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
}

// stop stops the loop, then the packages' processes.
func (r *packageRuntime) stop() {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, proc := range r.running {
		proc.stop(30 * time.Second)
	}
}

// Err reports the packages whose runtime failed, nil when none.
func (r *packageRuntime) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var msgs []string
	for n, err := range r.errs {
		msgs = append(msgs, fmt.Sprintf("%s: %v", n, err))
	}
	for n, proc := range r.running {
		if done, err := proc.exited(); done {
			msgs = append(msgs, fmt.Sprintf("%s exited (%v); its log %s ends:\n%s", n, err, proc.log, proc.tail()))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}

func (r *packageRuntime) setErr(pkg string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.errs, pkg)
		return
	}
	r.errs[pkg] = err
}

// packageName is the repository name of a package reference.
func packageName(ref string) string {
	if r, err := name.ParseReference(ref); err == nil {
		return path.Base(r.Context().RepositoryStr())
	}
	return path.Base(ref)
}

func (r *packageRuntime) reconcile(ctx context.Context) {
	c := r.p.client
	fl := &pkgv1.FunctionRevisionList{}
	if err := c.List(ctx, fl); err == nil {
		for i := range fl.Items {
			rev := &fl.Items[i]
			if rev.GetDesiredState() != pkgv1.PackageRevisionActive {
				continue
			}
			n := packageName(rev.Spec.Package)
			r.setErr(n, r.serveFunction(ctx, rev))
		}
	}
	pl := &pkgv1.ProviderRevisionList{}
	if err := c.List(ctx, pl); err == nil {
		for i := range pl.Items {
			rev := &pl.Items[i]
			if rev.GetDesiredState() != pkgv1.PackageRevisionActive {
				continue
			}
			n := packageName(rev.Spec.Package)
			switch n {
			case providerKubernetesName:
				r.setErr(n, r.runProviderKubernetes(ctx, rev))
			case release.ProviderPackageName:
				r.setErr(n, r.runBridge(ctx, rev))
			default:
				if bin, ok := r.p.inputs.awsRuntimes[n]; ok {
					r.setErr(n, r.runPackagedAWSProvider(ctx, rev, n, bin))
					continue
				}
				// Crossplane establishes a provider's CRDs only once its
				// runtime has recorded a serving certificate (for their
				// conversion webhooks), whether or not the provider runs.
				r.setErr(n, r.recordServerTLS(ctx, rev, n, filepath.Join(r.p.dir, "tls", n)))
			}
		}
	}
}

// serveFunction points a Function's revision at the function's running
// binary.
func (r *packageRuntime) serveFunction(ctx context.Context, rev *pkgv1.FunctionRevision) error {
	f, ok := r.p.xp.function(packageName(rev.Spec.Package))
	if !ok {
		return nil
	}
	if rev.Status.Endpoint == f.endpoint && rev.GetCondition(pkgv1.TypeRuntimeHealthy).Status == corev1.ConditionTrue {
		return nil
	}
	return r.p.xp.recordFunction(ctx, client.ObjectKeyFromObject(rev), f)
}

// runtimeHealthy marks a revision's runtime healthy, unless it is.
func (r *packageRuntime) runtimeHealthy(ctx context.Context, rev pkgv1.PackageRevisionWithRuntime, msg string) error {
	if rev.GetCondition(pkgv1.TypeRuntimeHealthy).Status == corev1.ConditionTrue {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.p.client.Get(ctx, client.ObjectKeyFromObject(rev), rev); err != nil {
			return err
		}
		rev.SetConditions(xpv2.Condition{Type: pkgv1.TypeRuntimeHealthy, Status: corev1.ConditionTrue, Reason: "HealthyPackageRevision",
			Message: msg, LastTransitionTime: metav1.Now()})
		return r.p.client.Status().Update(ctx, rev)
	})
}

// recordServerTLS creates a revision's serving certificate Secret (signed by
// Crossplane's CA, for the Service Crossplane's runtime would create) and
// names it in the revision's status, where Crossplane reads the CA bundle it
// puts in the package's conversion webhooks.
func (r *packageRuntime) recordServerTLS(ctx context.Context, rev *pkgv1.ProviderRevision, pkg, dir string) error {
	secret := pkg + "-tls-server"
	if n := rev.GetObservedTLSServerSecretName(); n != nil && *n == secret {
		return nil
	}
	if err := r.p.xp.ca.serve(dir, pkg, pkg+"."+crossplaneNamespace, pkg+"."+crossplaneNamespace+".svc"); err != nil {
		return err
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: crossplaneNamespace, Name: secret}, Data: map[string][]byte{}}
	for _, k := range []string{tlsCert, tlsKey, tlsCA} {
		b, err := os.ReadFile(filepath.Join(dir, k))
		if err != nil {
			return errors.Wrapf(err, "cannot read %s", k)
		}
		s.Data[k] = b
	}
	if err := r.p.client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return errors.Wrapf(err, "cannot create Secret %s", secret)
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.p.client.Get(ctx, client.ObjectKeyFromObject(rev), rev); err != nil {
			return err
		}
		rev.SetObservedTLSServerSecretName(&secret)
		return r.p.client.Status().Update(ctx, rev)
	})
}

// runProviderKubernetes gives provider-kubernetes its webhook certificate
// and, once Crossplane has established its CRDs, runs it.
func (r *packageRuntime) runProviderKubernetes(ctx context.Context, rev *pkgv1.ProviderRevision) error {
	certs := filepath.Join(r.p.dir, "tls", providerKubernetesName)
	if err := r.recordServerTLS(ctx, rev, providerKubernetesName, certs); err != nil {
		return err
	}
	if rev.GetCondition(pkgv1.TypeRevisionHealthy).Status != corev1.ConditionTrue {
		return nil
	}
	if !r.started(providerKubernetesName) {
		proc, err := r.p.runProviderKubernetes(ctx, certs)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.running[providerKubernetesName] = proc
		r.mu.Unlock()
	}
	return r.runtimeHealthy(ctx, rev, "running as a local process of the CAPXP plane")
}

func (r *packageRuntime) started(pkg string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.running[pkg]
	return ok
}

// runBridge runs the capxp manager as Crossplane's Deployment runtime would
// run CAPXP's Provider package: the entrypoint of the package's image (the
// capxp binary of its release) with the arguments and environment of the
// DeploymentRuntimeConfig an ImageConfig assigns the package, as the
// service account it names. When another revision becomes active (an
// upgrade), its pod replaces the previous one's.
func (r *packageRuntime) runBridge(ctx context.Context, rev *pkgv1.ProviderRevision) error {
	if err := r.recordServerTLS(ctx, rev, release.ProviderPackageName, filepath.Join(r.p.dir, "tls", release.ProviderPackageName)); err != nil {
		return err
	}
	if rev.GetCondition(pkgv1.TypeRevisionHealthy).Status != corev1.ConditionTrue {
		return nil
	}
	r.mu.Lock()
	old, running := r.running[release.ProviderPackageName], r.bridgeRevision
	r.mu.Unlock()
	if old != nil && running != rev.GetName() {
		// The Deployment's new pod template: the old pod goes.
		old.stop(30 * time.Second)
		r.p.pods.remove(crossplaneNamespace, running+"-local")
		r.mu.Lock()
		delete(r.running, release.ProviderPackageName)
		r.mu.Unlock()
	}
	if !r.started(release.ProviderPackageName) {
		bin, err := r.p.imageEntrypoint(ctx, rev.Spec.Package)
		if err != nil {
			return err
		}
		proc, metrics, err := r.p.runProviderPackage(ctx, rev, bin, filepath.Join(r.p.dir, "tls", release.ProviderPackageName))
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.running[release.ProviderPackageName] = proc
		r.bridgeRevision, r.bridgePackage = rev.GetName(), rev.Spec.Package
		r.bridgeMetrics = metrics
		r.mu.Unlock()
	}
	return r.runtimeHealthy(ctx, rev, "running as a local process of the CAPXP plane, with its DeploymentRuntimeConfig's identity and arguments")
}

// runtimeConfig is the DeploymentRuntimeConfig Crossplane would deploy a
// provider revision with: the one an ImageConfig matching its package
// assigns (the longest prefix wins), else the revision's own reference,
// else "default".
func (p *Plane) runtimeConfig(ctx context.Context, rev *pkgv1.ProviderRevision) (*pkgv1beta1.DeploymentRuntimeConfig, error) {
	cfgName, longest := "", -1
	l := &pkgv1beta1.ImageConfigList{}
	if err := p.client.List(ctx, l); err != nil {
		return nil, errors.Wrap(err, "cannot list ImageConfigs")
	}
	for i := range l.Items {
		ic := &l.Items[i]
		if ic.Spec.Runtime == nil || ic.Spec.Runtime.ConfigReference == nil {
			continue
		}
		for _, m := range ic.Spec.MatchImages {
			if strings.HasPrefix(rev.Spec.Package, m.Prefix) && len(m.Prefix) > longest {
				cfgName, longest = ic.Spec.Runtime.ConfigReference.Name, len(m.Prefix)
			}
		}
	}
	if cfgName == "" {
		cfgName = "default"
		if ref := rev.GetRuntimeConfigRef(); ref != nil {
			cfgName = ref.Name
		}
	}
	drc := &pkgv1beta1.DeploymentRuntimeConfig{}
	if err := p.client.Get(ctx, client.ObjectKey{Name: cfgName}, drc); err != nil {
		return nil, errors.Wrapf(err, "cannot get DeploymentRuntimeConfig %s", cfgName)
	}
	return drc, nil
}

// crossplaneMetricsPort is the name of the container port Crossplane's
// runtime adds to a provider's pod, at 8080, unless the runtime config
// declares one of that name.
const crossplaneMetricsPort = "metrics"

// The webhook port Crossplane's runtime adds to a provider's pod and its
// Service, and the label that Service selects the provider's pods by.
const (
	crossplaneWebhookPort       = "webhook"
	crossplaneWebhookPortNumber = 9443
	providerLabel               = "pkg.crossplane.io/provider"
)

// servesOnProviderService says whether a capxp binary serves its webhook
// server on the Service Crossplane gives its Provider: releases that do
// have the --webhook-service-port flag, added with it. An earlier release
// (the one an upgrade starts from) serves none there, and gets no URL.
func servesOnProviderService(ctx context.Context, bin string) bool {
	out, err := exec.CommandContext(ctx, bin, "manager", "--help").Output()
	return err == nil && strings.Contains(string(out), "--webhook-service-port")
}

// applyProviderService creates or updates the Service Crossplane's runtime
// gives a provider package: named after the Provider, in Crossplane's
// namespace, selecting the active revision's pods, its webhook port 9443.
func (p *Plane) applyProviderService(ctx context.Context, rev *pkgv1.ProviderRevision, provider string) error {
	if provider == "" {
		return errors.Errorf("ProviderRevision %s has no %s label", rev.GetName(), pkgv1.LabelParentPackage)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: crossplaneNamespace, Name: provider}}
	_, err := controllerutil.CreateOrUpdate(ctx, p.client, svc, func() error {
		svc.Spec.Selector = map[string]string{pkgv1.LabelRevision: rev.GetName(), providerLabel: provider}
		svc.Spec.Ports = []corev1.ServicePort{{Name: crossplaneWebhookPort, Protocol: corev1.ProtocolTCP,
			Port: crossplaneWebhookPortNumber, TargetPort: intstr.FromString(crossplaneWebhookPort)}}
		return nil
	})
	return errors.Wrapf(err, "cannot apply the Service %s/%s of Provider %s", crossplaneNamespace, provider, provider)
}

// flagPort is the port of a --flag=[host]:port argument, else def.
func flagPort(args []string, flag string, def int32) int32 {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			if n, err := strconv.Atoi(v[strings.LastIndex(v, ":")+1:]); err == nil {
				def = int32(n) //nolint:gosec // a port number fits
			}
		}
	}
	return def
}

// runProviderPackage starts bin, the capxp binary of the bridge package's
// image, as the package's pod, and returns its metrics endpoint (HTTPS, authenticated and authorized
// with the API server, as the Deployment serves it).
func (p *Plane) runProviderPackage(ctx context.Context, rev *pkgv1.ProviderRevision, bin, certs string) (*process, string, error) {
	drc, err := p.runtimeConfig(ctx, rev)
	if err != nil {
		return nil, "", err
	}
	provider := rev.GetLabels()[pkgv1.LabelParentPackage]
	if err := p.applyProviderService(ctx, rev, provider); err != nil {
		return nil, "", err
	}
	// What Crossplane's Deployment runtime would create: the service
	// account, named by the runtime config or after the revision.
	sa := rev.GetName()
	if t := drc.Spec.ServiceAccountTemplate; t != nil && t.Metadata != nil && t.Metadata.Name != nil {
		sa = *t.Metadata.Name
	}
	if err := p.client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: crossplaneNamespace, Name: sa}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, "", errors.Wrapf(err, "cannot create ServiceAccount %s/%s", crossplaneNamespace, sa)
	}
	podName := rev.GetName() + "-local"
	dir := filepath.Join(p.dir, "pods", podName)
	kubeconfig, err := p.serviceAccountKubeconfig(ctx, crossplaneNamespace, sa, dir)
	if err != nil {
		return nil, "", err
	}
	// The environment Crossplane's runtime sets in a provider's container:
	// its namespace, its Provider's name, and where its serving
	// certificate (with Crossplane's CA) is mounted.
	env := map[string]string{"POD_NAMESPACE": crossplaneNamespace, "PROVIDER_NAME": provider,
		"TLS_SERVER_CERTS_DIR": certs, "WEBHOOK_TLS_CERT_DIR": certs}
	var args []string
	// The pod's labels, as Crossplane's runtime gives them: the runtime
	// config's and its own revision and provider labels; its container's
	// ports: the runtime config's, Crossplane's metrics port unless one has
	// its name, and the webhook port its Service targets.
	podLabels := map[string]string{pkgv1.LabelRevision: rev.GetName(), providerLabel: provider}
	ports := map[string]int32{crossplaneMetricsPort: 8080, crossplaneWebhookPort: crossplaneWebhookPortNumber}
	if t := drc.Spec.DeploymentTemplate; t != nil && t.Spec != nil {
		maps.Copy(podLabels, t.Spec.Template.Labels)
		for i := range t.Spec.Template.Spec.Containers {
			c := &t.Spec.Template.Spec.Containers[i]
			if c.Name != "package-runtime" {
				continue
			}
			maps.Copy(ports, containerPorts(*c))
			for _, e := range c.Env {
				if e.ValueFrom != nil {
					return nil, "", errors.Errorf("DeploymentRuntimeConfig %s: env %s comes from a source this plane does not provide", drc.GetName(), e.Name)
				}
				env[e.Name] = e.Value
			}
			args = c.Args
		}
	}
	if len(args) == 0 {
		args = []string{"manager"}
	}
	envList := make([]string, 0, len(env)+1)
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	for i, a := range args {
		args[i] = expand(a, env)
	}
	// The pod's own network, stood in for by free loopback ports.
	health, err := freePort()
	if err != nil {
		return nil, "", err
	}
	diag, err := freePort()
	if err != nil {
		return nil, "", err
	}
	// The ports the manager serves its health and diagnostics on in a pod:
	// its arguments', else its defaults.
	healthPort, diagPort := flagPort(args, "--health-addr", 9440), flagPort(args, "--diagnostics-address", 8443)
	args = append(args, "--health-addr="+hostPort(health), "--diagnostics-address="+hostPort(diag))
	served := map[int32]string{healthPort: hostPort(health), diagPort: hostPort(diag)}
	if servesOnProviderService(ctx, bin) {
		// The webhook server behind the Provider's Service, stood in for
		// as the Deployment runner does: by URL at the free port it
		// serves on (its certificate and CA are Crossplane's, from the
		// environment above).
		webhook, err := freePort()
		if err != nil {
			return nil, "", err
		}
		served[flagPort(args, "--webhook-port", crossplaneWebhookPortNumber)] = hostPort(webhook)
		args = append(args, fmt.Sprintf("--webhook-port=%d", webhook), "--webhook-url=https://"+hostPort(webhook))
	}
	proc, err := startProcess(p.dir, podName, bin, append(envList, "KUBECONFIG="+kubeconfig), args...)
	if err != nil {
		return nil, "", err
	}
	p.pods.add(localPod{namespace: crossplaneNamespace, name: podName, labels: podLabels, ports: ports, served: served})
	if err := proc.waitHealthy(ctx, fmt.Sprintf("http://%s/readyz", hostPort(health)), 2*time.Minute); err != nil {
		proc.stop(10 * time.Second)
		return nil, "", err
	}
	return proc, fmt.Sprintf("https://%s/metrics", hostPort(diag)), nil
}

// BridgePackage is the package (its reference, as the running revision
// names it) whose image the bridge's pod runs; empty when none runs.
func (p *Plane) BridgePackage() string {
	if p.runtime == nil {
		return ""
	}
	p.runtime.mu.Lock()
	defer p.runtime.mu.Unlock()
	if _, ok := p.runtime.running[release.ProviderPackageName]; !ok {
		return ""
	}
	return p.runtime.bridgePackage
}

// Bridges names every CAPXP bridge the plane is running: its own manager or
// the Deployment's replica, the replicas StartManager added, and the
// bridge's Provider package when Crossplane installed it. An install path
// that runs two bridges shows both.
func (p *Plane) Bridges() []string {
	var out []string
	for _, m := range append([]*process{p.manager}, p.extraManagers...) {
		if m == nil {
			continue
		}
		if done, _ := m.exited(); !done {
			out = append(out, m.name)
		}
	}
	if r := p.runtime; r != nil {
		r.mu.Lock()
		if proc, ok := r.running[release.ProviderPackageName]; ok {
			if done, _ := proc.exited(); !done {
				out = append(out, "Provider package "+release.ProviderPackageName)
			}
		}
		r.mu.Unlock()
	}
	return out
}
