package plane

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	"github.com/capxp/cluster-api-provider-crossplane/compositions"
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
	certs := filepath.Join(p.dir, "tls", "provider-kubernetes")
	if err := ca.serve(certs, "provider-kubernetes"); err != nil {
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
	proc, err := startProcess(p.dir, "provider-kubernetes", p.inputs.providerKubernetes,
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

// startCAPI runs CAPI's Cluster, Machine, MachineSet and MachineDeployment
// reconcilers in this process, as CAPI's manager configures them.
func (p *Plane) startCAPI(ctx context.Context) error {
	// In-process controllers log through controller-runtime's logger, to a
	// file beside the other components' logs.
	f, err := os.OpenFile(filepath.Join(p.dir, "capi.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return errors.Wrap(err, "cannot create CAPI's log")
	}
	ctrllog.SetLogger(zap.New(zap.WriteTo(f)))
	p.capi, err = p.mgmt.StartCAPI(ctx)
	return err
}

// startManager runs the capxp binary's manager against the management
// cluster, as a platform team would deploy it.
func (p *Plane) startManager(ctx context.Context) error {
	if p.opts.Clusterctl || p.opts.Release != "" {
		p.progress("left to clusterctl")
		return nil
	}
	if p.opts.ManagerBinary == "" {
		return errors.New("no capxp binary to run the manager from")
	}
	health, err := freePort()
	if err != nil {
		return err
	}
	metrics, err := freePort()
	if err != nil {
		return err
	}
	profiler, err := freePort()
	if err != nil {
		return err
	}
	// Metrics and pprof over plain HTTP, on the loopback interface only.
	proc, err := startProcess(p.dir, "capxp-manager", p.opts.ManagerBinary, nil,
		"manager", "--kubeconfig="+p.kubeconfig, "--diagnostics-address="+hostPort(metrics), "--insecure-diagnostics", "--health-addr="+hostPort(health),
		"--profiler-address="+hostPort(profiler))
	if err != nil {
		return err
	}
	p.manager = proc
	p.managerMetrics = fmt.Sprintf("http://%s/metrics", hostPort(metrics))
	p.managerProfiler = fmt.Sprintf("http://%s/debug/pprof/", hostPort(profiler))
	return proc.waitHealthy(ctx, fmt.Sprintf("http://%s/readyz", hostPort(health)), time.Minute)
}

// install applies CAPXP's XRDs and the Compositions the local plane can run
// (local and byo), and waits until Crossplane serves the XR kinds and has
// accepted the Compositions.
func (p *Plane) install(ctx context.Context) error {
	objs, err := compositions.ReadDir("xrds")
	if err != nil {
		return err
	}
	xrds := len(objs)
	for _, b := range []string{"local", "byo"} {
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

// recordCAPI records the CAPI core provider the plane runs in clusterctl's
// inventory, as `clusterctl init` would have: clusterctl then installs
// infrastructure providers beside it, and checks their contract against it,
// rather than installing CAPI (whose Deployment nothing would run here).
func (p *Plane) recordCAPI(ctx context.Context) error {
	version, err := capxp.RequiredVersion(capiModule)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: CAPINamespace}}
	if err := p.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return errors.Wrap(err, "cannot create CAPI's namespace")
	}
	inv := &unstructured.Unstructured{}
	inv.SetGroupVersionKind(schema.GroupVersionKind{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Kind: "Provider"})
	inv.SetNamespace(CAPINamespace)
	inv.SetName("cluster-api")
	inv.SetLabels(map[string]string{
		"cluster.x-k8s.io/provider":        "cluster-api",
		"clusterctl.cluster.x-k8s.io":      "",
		"clusterctl.cluster.x-k8s.io/core": "inventory",
	})
	inv.Object["providerName"] = "cluster-api"
	inv.Object["type"] = "CoreProvider"
	inv.Object["version"] = version
	if err := p.client.Create(ctx, inv); err != nil && !apierrors.IsAlreadyExists(err) {
		return errors.Wrap(err, "cannot record CAPI in clusterctl's inventory")
	}
	return nil
}

// CAPINamespace is where clusterctl would have installed CAPI.
const CAPINamespace = "capi-system"
