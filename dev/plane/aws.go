package plane

import (
	"context"
	_ "embed"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
)

// AWSRuntimeVersion is the provider-upjet-aws release whose family runtimes
// hack/ensure-tools.sh builds (provider-aws-runtime): the newest v2 release
// whose dependencies the Go module proxy serves. Its CRDs of the services
// CAPXP composes serve and store the same versions as those of the release
// the packages carry.
const AWSRuntimeVersion = "v2.5.0"

// awsServices are the family's services whose runtimes the plane runs
// (make test-aws): the machines', the pools' and the cluster network's. The others the
// Configuration depends on (eks, iam) are installed without a runtime.
var awsServices = []string{"ec2", "elbv2", "secretsmanager", "autoscaling"}

// awsRuntimes finds the family's service runtimes, by package name, and
// the AWS API emulator (moto_server, from the machine's Python). The
// family's config package (provider-family-aws) runs nothing here: its
// provider only tracks ProviderConfig usage, for deleting a ProviderConfig
// in use, and links every service's API types.
func awsRuntimes(d tools.Dir) (map[string]string, string, error) {
	bins := map[string]string{}
	var err error
	for _, s := range awsServices {
		name := "provider-aws-" + s
		bin, berr := d.Binary(name, AWSRuntimeVersion)
		if berr != nil {
			err = tools.Missing(err, errors.Errorf("%s: build it with hack/ensure-tools.sh provider-aws-runtime", berr))
			continue
		}
		bins[name] = bin
	}
	moto, lerr := exec.LookPath("moto_server")
	if lerr != nil {
		err = tools.Missing(err, errors.New("moto_server, the AWS API emulator, is not on PATH: install Python's moto[server] 5"))
	}
	return bins, moto, err
}

// motoPatches is a sitecustomize.py that fixes a moto 5.2.1 bug the aws
// machine pools meet (read it for which).
//
//go:embed moto/sitecustomize.py
var motoPatches []byte

// startAWSEmulator runs moto_server on loopback: the AWS API the aws
// family's providers call, through the endpoint of the ProviderConfigs a
// test creates (AWSEndpoint).
func (p *Plane) startAWSEmulator(ctx context.Context) error {
	if p.opts.AWSEndpoint != "" {
		p.awsEndpoint = p.opts.AWSEndpoint
		return nil
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	patches := filepath.Join(p.dir, "moto-patches")
	if err := os.MkdirAll(patches, 0o700); err != nil {
		return errors.Wrap(err, "cannot write the emulator's patches")
	}
	if err := os.WriteFile(filepath.Join(patches, "sitecustomize.py"), motoPatches, 0o600); err != nil {
		return errors.Wrap(err, "cannot write the emulator's patches")
	}
	pythonPath := patches
	if pp := os.Getenv("PYTHONPATH"); pp != "" {
		pythonPath += string(os.PathListSeparator) + pp
	}
	proc, err := startProcess(p.dir, "moto", p.inputs.moto, []string{"PYTHONPATH=" + pythonPath}, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	if err != nil {
		return err
	}
	p.procs = append(p.procs, proc)
	p.awsEndpoint = "http://" + hostPort(port)
	return proc.waitHealthy(ctx, p.awsEndpoint+"/moto-api/data.json", time.Minute)
}

// AWSEndpoint is the AWS API emulator's URL (Options.AWS), for a
// ProviderConfig's spec.endpoint.url.static; empty without one.
func (p *Plane) AWSEndpoint() string { return p.awsEndpoint }

// startAWSProviders runs, in clusterctl mode, the AWS family's service
// providers as local processes of the plane, with a webhook certificate of
// their own, once their CRDs are installed (the management cluster starts
// with them).
func (p *Plane) startAWSProviders(ctx context.Context) error {
	ca, err := newAuthority("provider-aws-webhook")
	if err != nil {
		return err
	}
	for _, pkg := range slices.Sorted(maps.Keys(p.inputs.awsRuntimes)) {
		certs := filepath.Join(p.dir, "tls", pkg)
		if err := ca.serve(certs, pkg); err != nil {
			return err
		}
		proc, err := p.runAWSProvider(ctx, pkg, p.inputs.awsRuntimes[pkg], certs)
		if err != nil {
			return err
		}
		p.procs = append(p.procs, proc)
	}
	return nil
}

// runAWSProvider runs one of the AWS family's service providers with the
// webhook certificate in certs, its listeners on free loopback ports, and
// the administrator's identity, and waits until it is ready.
func (p *Plane) runAWSProvider(ctx context.Context, pkg, bin, certs string) (*process, error) {
	var ports [3]int
	for i := range ports {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = port
	}
	proc, err := startProcess(p.dir, pkg, bin, []string{"KUBECONFIG=" + p.kubeconfig},
		"--certs-dir="+certs, fmt.Sprintf("--webhook-port=%d", ports[0]),
		"--metrics-bind-address="+hostPort(ports[1]), "--health-probe-bind-addr="+hostPort(ports[2]),
		// Drift is looked for every minute, not the default ten: a test
		// deletes what the emulator holds behind the providers' backs too.
		"--poll=1m", "--sync=1h")
	if err != nil {
		return nil, err
	}
	if err := proc.waitHealthy(ctx, fmt.Sprintf("http://%s/readyz", hostPort(ports[2])), 2*time.Minute); err != nil {
		proc.stop(10 * time.Second)
		return nil, err
	}
	return proc, nil
}

// runPackagedAWSProvider runs one of the AWS family's packages as Crossplane's
// Deployment runtime would, as a local process: once Crossplane has
// established its CRDs, with its serving certificate, its listeners on
// free loopback ports, and the administrator's identity, as
// provider-kubernetes runs here.
func (r *packageRuntime) runPackagedAWSProvider(ctx context.Context, rev *pkgv1.ProviderRevision, pkg, bin string) error {
	certs := filepath.Join(r.p.dir, "tls", pkg)
	if err := r.recordServerTLS(ctx, rev, pkg, certs); err != nil {
		return err
	}
	if rev.GetCondition(pkgv1.TypeRevisionHealthy).Status != corev1.ConditionTrue {
		return nil
	}
	if !r.started(pkg) {
		proc, err := r.p.runAWSProvider(ctx, pkg, bin, certs)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.running[pkg] = proc
		r.mu.Unlock()
	}
	return r.runtimeHealthy(ctx, rev, "running as a local process of the CAPXP plane, against "+strings.TrimPrefix(r.p.awsEndpoint, "http://"))
}
