package plane

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	fnserver "github.com/capxp/cluster-api-provider-crossplane/internal/function"

	"github.com/capxp/cluster-api-provider-crossplane/dev/lifeline"
	"github.com/capxp/cluster-api-provider-crossplane/dev/localkube"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
)

const (
	crossplaneNamespace = "crossplane-system"
	rootCASecret        = "crossplane-root-ca"
	clientTLSSecret     = "crossplane-tls-client"
)

// CrossplaneOptions say where StartCrossplane runs Crossplane.
type CrossplaneOptions struct {
	// Config reaches the API server as an administrator (a member of
	// system:masters). Required.
	Config *rest.Config
	// Kubeconfig is a kubeconfig file with the same identity, for the
	// crossplane processes; written into Dir from Config when empty.
	Kubeconfig string
	// Dir holds the processes' logs, certificates and Crossplane's package
	// cache. Required; kept after Stop.
	Dir string
	// Tools is the directory hack/ensure-tools.sh filled (it needs
	// crossplane, crds and the two functions); tools.Default() when empty.
	Tools tools.Dir
}

// Crossplane is Crossplane core and the composition functions the
// Configuration package depends on (function-patch-and-transform and
// function-auto-ready), running as local processes.
type Crossplane struct {
	// Version is Crossplane core's version.
	Version string

	client client.Client
	// procs are the functions, then core.
	procs []*process
	core  *process
	// coreHealth is core's health endpoint.
	coreHealth string
	// ca is Crossplane's root CA, which signs the packages' certificates.
	ca *authority
	// functions are the running functions, by package name.
	functions map[string]runningFunction
	// servers are the functions served in-process (CAPXP's own).
	servers []*fnserver.Server
}

// runningFunction is a function binary serving on loopback.
type runningFunction struct {
	function
	// endpoint is where it serves gRPC, certs the folder of its serving
	// certificate.
	endpoint, certs string
}

// function is the running function of a package name.
func (c *Crossplane) function(pkg string) (runningFunction, bool) {
	f, ok := c.functions[pkg]
	return f, ok
}

// StartCrossplane runs Crossplane core and the two composition functions
// against an existing API server — the plane's, or a test's — and returns
// once Crossplane is healthy and both Functions' revisions are healthy, so
// that Compositions using them compose. It does what Crossplane's Helm chart
// and package manager would, with local processes and no registry:
//
//  1. `crossplane core init` installs Crossplane's CRDs (from the tools
//     directory) and creates its CA and client certificate in
//     crossplane-system;
//  2. each function binary serves gRPC with mutual TLS on a free loopback
//     port, with a certificate signed by Crossplane's CA;
//  3. `crossplane core start --package-runtime=External` runs with free
//     metrics and health ports and webhooks off;
//  4. each function is installed as a Function with packagePullPolicy Never,
//     its package metadata placed in Crossplane's package cache, and its
//     revision pointed at the running binary.
//
// Crossplane's CRDs already installed (by a test, say) are updated, not
// duplicated. The functions' SDK tries port 8080 for metrics and carries on
// without it. Nothing is left running after Stop; if this process dies outright,
// the children die with it. On error, StartCrossplane stops what it started.
func StartCrossplane(ctx context.Context, o CrossplaneOptions) (*Crossplane, error) {
	if o.Config == nil || o.Dir == "" {
		return nil, errors.New("StartCrossplane needs the API server's Config and a working Dir")
	}
	if o.Tools == "" {
		o.Tools = tools.Default()
	}
	in, errs := resolveCrossplane(o.Tools)
	if err := tools.Missing(errs...); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, errors.Wrap(err, "cannot create Crossplane's directory")
	}
	if o.Kubeconfig == "" {
		kc, err := localkube.Kubeconfig(o.Config, "crossplane")
		if err != nil {
			return nil, err
		}
		o.Kubeconfig = filepath.Join(o.Dir, "crossplane.kubeconfig")
		if err := os.WriteFile(o.Kubeconfig, kc, 0o600); err != nil {
			return nil, errors.Wrap(err, "cannot write Crossplane's kubeconfig")
		}
	}
	return startCrossplane(ctx, crossplaneRun{config: o.Config, kubeconfig: o.Kubeconfig, dir: o.Dir, inputs: in})
}

// Stop stops core, then the functions, and waits for each.
func (c *Crossplane) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop(30 * time.Second)
	}
	for _, s := range c.servers {
		s.Stop()
	}
}

// Running returns nil while every process runs, else an error naming the one
// that exited and the end of its log.
func (c *Crossplane) Running() error {
	for _, p := range c.procs {
		if done, err := p.exited(); done {
			return errors.Errorf("%s exited (%v); its log %s ends:\n%s", p.name, err, p.log, p.tail())
		}
	}
	return nil
}

// crossplaneRun is one start of Crossplane.
type crossplaneRun struct {
	config     *rest.Config
	kubeconfig string
	dir        string
	inputs     crossplaneInputs
	// caBundle is a PEM file of more CAs Crossplane trusts when it pulls
	// packages (the plane's registry's).
	caBundle string
	// packages leaves the Functions to be installed from packages: the
	// function binaries run, but no Function is created; the plane's
	// package runtime points the revisions Crossplane makes at them. The
	// functions also keep off port 8080 (see Plane.runProviderKubernetes).
	packages bool
}

// startCrossplane runs Crossplane core on an API server the way its Helm
// chart would, but as local processes: `crossplane core init` (CRDs and
// TLS), the functions serving mutual TLS on loopback with their packages in
// Crossplane's package cache, and `crossplane core start` with the External
// package runtime; then it installs the Functions and points their revisions
// at the running binaries.
func startCrossplane(ctx context.Context, r crossplaneRun) (*Crossplane, error) {
	c := &Crossplane{Version: r.inputs.version, functions: map[string]runningFunction{}}
	if err := c.start(ctx, r); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Crossplane) start(ctx context.Context, r crossplaneRun) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return errors.Wrap(err, "cannot build Crossplane's client scheme")
	}
	if err := pkgv1.AddToScheme(scheme); err != nil {
		return errors.Wrap(err, "cannot add Crossplane's package types to the scheme")
	}
	var err error
	if c.client, err = client.New(r.config, client.Options{Scheme: scheme}); err != nil {
		return errors.Wrap(err, "cannot create Crossplane's client")
	}
	xpBin := r.inputs.binary
	if err := c.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: crossplaneNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return errors.Wrap(err, "cannot create the crossplane-system namespace")
	}
	env := []string{
		"KUBECONFIG=" + r.kubeconfig,
		"POD_NAMESPACE=" + crossplaneNamespace,
		"ENABLE_WEBHOOKS=false",
		"CRDS_PATH=" + r.inputs.crds,
		"TLS_CA_SECRET_NAME=" + rootCASecret,
		"TLS_CLIENT_SECRET_NAME=" + clientTLSSecret,
	}
	// The first init can fail until the Lock CRD it installs is served.
	if err := retryCommand(ctx, 6, func() ([]byte, error) {
		cmd := exec.CommandContext(ctx, xpBin, "core", "init")
		cmd.Env = append(os.Environ(), env...)
		lifeline.Attach(cmd)
		return cmd.CombinedOutput()
	}); err != nil {
		return errors.Wrap(err, "crossplane core init failed")
	}

	ca, clientDir, err := c.crossplaneTLS(ctx, r.dir)
	if err != nil {
		return err
	}
	c.ca = ca
	cacheDir := filepath.Join(r.dir, "xpkg")
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return errors.Wrap(err, "cannot create the package cache")
	}
	digests := map[string]string{}
	if r.packages {
		// The functions' SDK tries :8080 for metrics and carries on
		// without it; provider-kubernetes, started later, cannot.
		l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", ":8080")
		if err != nil {
			return errors.Wrap(err, "provider-kubernetes needs port 8080, which another process uses")
		}
		defer l.Close()
	}
	for _, f := range r.inputs.functions {
		digest, err := cachePackage(cacheDir, f)
		if err != nil {
			return err
		}
		digests[f.FunctionName()] = digest
		certs := filepath.Join(r.dir, "tls", f.Name())
		if err := ca.serve(certs, f.Name()); err != nil {
			return err
		}
		if f.inProcess != nil {
			// Served until Stop, whatever ctx does.
			srv, err := fnserver.Serve(context.WithoutCancel(ctx), f.inProcess(), certs)
			if err != nil {
				return errors.Wrapf(err, "cannot serve %s", f.Name())
			}
			c.servers = append(c.servers, srv)
			c.functions[f.Name()] = runningFunction{function: f, endpoint: srv.Address, certs: certs}
			continue
		}
		port, err := freePort()
		if err != nil {
			return err
		}
		proc, err := startProcess(r.dir, f.Name(), f.binary, []string{"TLS_SERVER_CERTS_DIR=" + certs},
			"--address="+hostPort(port))
		if err != nil {
			return err
		}
		c.procs = append(c.procs, proc)
		if err := proc.waitFor(ctx, 30*time.Second, func() bool { return dialable(hostPort(port)) }); err != nil {
			return err
		}
		c.functions[f.Name()] = runningFunction{function: f, endpoint: hostPort(port), certs: certs}
	}

	metrics, err := freePort()
	if err != nil {
		return err
	}
	health, err := freePort()
	if err != nil {
		return err
	}
	coreEnv := append(append([]string{}, env...), "TLS_CLIENT_CERTS_DIR="+clientDir)
	if r.caBundle != "" {
		coreEnv = append(coreEnv, "CA_BUNDLE_PATH="+r.caBundle)
	}
	core, err := startProcess(r.dir, "crossplane", xpBin, coreEnv,
		"--debug", "core", "start", "--package-runtime=External", "--enable-webhooks=false",
		"--cache-dir="+cacheDir, fmt.Sprintf("--metrics-port=%d", metrics), fmt.Sprintf("--health-probe-port=%d", health),
		"--poll-interval=10s", "--sync-interval=1m")
	if err != nil {
		return err
	}
	c.procs = append(c.procs, core)
	c.core = core
	c.coreHealth = fmt.Sprintf("http://%s/healthz", hostPort(health))
	if err := core.waitHealthy(ctx, c.coreHealth, 2*time.Minute); err != nil {
		return err
	}

	if r.packages {
		return nil
	}
	for _, f := range r.inputs.functions {
		if err := c.installFunction(ctx, c.functions[f.Name()], digests[f.FunctionName()]); err != nil {
			return err
		}
	}
	return nil
}

// crossplaneTLS reads the CA and client certificate `core init` created; the
// client certificate goes where `core start` reads it.
func (c *Crossplane) crossplaneTLS(ctx context.Context, workDir string) (*authority, string, error) {
	read := func(n string) (*corev1.Secret, error) {
		s := &corev1.Secret{}
		err := c.client.Get(ctx, client.ObjectKey{Namespace: crossplaneNamespace, Name: n}, s)
		return s, errors.Wrapf(err, "cannot read Secret %s/%s", crossplaneNamespace, n)
	}
	root, err := read(rootCASecret)
	if err != nil {
		return nil, "", err
	}
	ca, err := loadAuthority(root.Data["tls.crt"], root.Data["tls.key"])
	if err != nil {
		return nil, "", err
	}
	cl, err := read(clientTLSSecret)
	if err != nil {
		return nil, "", err
	}
	dir := filepath.Join(workDir, "tls", "crossplane-client")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", errors.Wrap(err, "cannot create the client certificate directory")
	}
	for _, k := range []string{tlsCert, tlsKey, tlsCA} {
		if err := os.WriteFile(filepath.Join(dir, k), cl.Data[k], 0o600); err != nil {
			return nil, "", errors.Wrapf(err, "cannot write %s", k)
		}
	}
	return ca, dir, nil
}

// cachePackage places a function's package metadata (staged from its module
// into the tools directory) in Crossplane's package cache under the key Crossplane computes for its reference, so a Function
// with packagePullPolicy Never installs without a registry. It returns the
// digest the Function must reference.
func cachePackage(dir string, f function) (string, error) {
	meta := f.meta
	if meta == nil {
		var err error
		if meta, err = os.ReadFile(f.pkgMeta); err != nil {
			return "", errors.Wrapf(err, "cannot read the package metadata of %s", f.Name())
		}
	}
	sum := sha256.Sum256(meta)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	f2, err := os.Create(filepath.Join(dir, cacheKey(f.Package, digest)+".gz"))
	if err != nil {
		return "", errors.Wrapf(err, "cannot cache the package of %s", f.Name())
	}
	defer f2.Close()
	w := gzip.NewWriter(f2)
	if _, err := w.Write(meta); err != nil {
		return "", errors.Wrapf(err, "cannot cache the package of %s", f.Name())
	}
	if err := w.Close(); err != nil {
		return "", errors.Wrapf(err, "cannot cache the package of %s", f.Name())
	}
	return digest, nil
}

// cacheKey is the name Crossplane's package cache (crossplane-runtime's
// xpkg.FriendlyID) gives a package source at a digest: a DNS label of the
// source's first 50 and the digest's first 12 characters. Importing xpkg would
// pull registry credential helpers for every cloud into the module.
func cacheKey(source, digest string) string {
	s := truncate(source, 50) + "-" + truncate(digest, 12)
	var b strings.Builder
	for i := range len(s) {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
			b.WriteByte(c)
		case strings.IndexByte("./:-", c) >= 0 && i != 0 && i != 62 && i != len(s)-1:
			b.WriteByte('-')
		}
		if i == 62 {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// installFunction creates the Function from Crossplane's package cache and
// points the revision Crossplane makes at the running binary.
func (c *Crossplane) installFunction(ctx context.Context, f runningFunction, digest string) error {
	fn := &pkgv1.Function{ObjectMeta: metav1.ObjectMeta{Name: f.FunctionName()}}
	fn.Spec.Package = f.Package + "@" + digest
	fn.Spec.PackagePullPolicy = ptr.To(corev1.PullNever)
	if err := c.client.Create(ctx, fn); err != nil && !apierrors.IsAlreadyExists(err) {
		return errors.Wrapf(err, "cannot create Function %s", f.FunctionName())
	}

	// Crossplane creates the active revision from the cached package.
	revisions := func() []pkgv1.FunctionRevision {
		l := &pkgv1.FunctionRevisionList{}
		if err := c.client.List(ctx, l, client.MatchingLabels{"pkg.crossplane.io/package": f.FunctionName()}); err != nil {
			return nil
		}
		return l.Items
	}
	var rev client.ObjectKey
	if err := c.core.waitFor(ctx, time.Minute, func() bool {
		rs := revisions()
		for i := range rs {
			if rs[i].GetDesiredState() == pkgv1.PackageRevisionActive {
				rev = client.ObjectKeyFromObject(&rs[i])
				return true
			}
		}
		return false
	}); err != nil {
		return errors.Wrapf(err, "Crossplane made no active revision of Function %s", f.FunctionName())
	}
	if err := c.recordFunction(ctx, rev, f); err != nil {
		return err
	}
	var seen string
	if err := c.core.waitFor(ctx, time.Minute, func() bool {
		r := &pkgv1.FunctionRevision{}
		if err := c.client.Get(ctx, rev, r); err != nil {
			return false
		}
		seen = fmt.Sprintf("%+v", r.Status.Conditions)
		return r.GetCondition(pkgv1.TypeRevisionHealthy).Status == corev1.ConditionTrue && r.Status.Endpoint == f.endpoint
	}); err != nil {
		return errors.Wrapf(err, "the revision of Function %s did not become healthy (conditions %s)", f.FunctionName(), seen)
	}
	return nil
}

// recordFunction does for a Function's revision what the package runtime
// would: stores the function's serving certificate in a Secret and records
// it, and the endpoint of the running binary, in the revision's status, and
// marks the runtime healthy. With the External runtime Crossplane leaves
// all three to whoever runs the function.
func (c *Crossplane) recordFunction(ctx context.Context, rev client.ObjectKey, f runningFunction) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: crossplaneNamespace, Name: f.FunctionName() + "-tls-server"}, Data: map[string][]byte{}}
	for _, k := range []string{tlsCert, tlsKey, tlsCA} {
		b, err := os.ReadFile(filepath.Join(f.certs, k))
		if err != nil {
			return errors.Wrapf(err, "cannot read %s", k)
		}
		secret.Data[k] = b
	}
	if err := c.client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return errors.Wrapf(err, "cannot create Secret %s", secret.Name)
	}
	return errors.Wrapf(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r := &pkgv1.FunctionRevision{}
		if err := c.client.Get(ctx, rev, r); err != nil {
			return err
		}
		r.Status.Endpoint = f.endpoint
		r.Status.TLSServerSecretName = &secret.Name
		r.SetConditions(xpv2.Condition{Type: pkgv1.TypeRuntimeHealthy, Status: corev1.ConditionTrue, Reason: "HealthyPackageRevision",
			Message: "running as a local process of the CAPXP plane", LastTransitionTime: metav1.Now()})
		return c.client.Status().Update(ctx, r)
	}), "cannot record the endpoint of Function %s", f.FunctionName())
}

// retryCommand runs a command until it succeeds, at most n times.
func retryCommand(ctx context.Context, n int, run func() ([]byte, error)) error {
	var out []byte
	var err error
	for range n {
		if out, err = run(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	return errors.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
}
