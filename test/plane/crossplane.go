package plane

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/packages"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

const (
	crossplaneNamespace = "crossplane-system"
	rootCASecret        = "crossplane-root-ca"
	clientTLSSecret     = "crossplane-tls-client"
)

// startCrossplane runs Crossplane core on the management API server the way
// its Helm chart would, but as local processes: `crossplane core init`
// (CRDs and TLS), the functions serving mutual TLS on loopback with their
// packages in Crossplane's package cache, and `crossplane core start` with the
// External package runtime; then it installs the Functions and points their
// revisions at the running binaries.
func (p *Plane) startCrossplane(ctx context.Context) error {
	xpBin := envtest.Tool("crossplane", p.versions.crossplane.Version)
	if err := p.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: crossplaneNamespace}}); err != nil && !kerrors.IsAlreadyExists(err) {
		return errors.Wrap(err, "cannot create the crossplane-system namespace")
	}
	env := []string{
		"KUBECONFIG=" + p.kubeconfig,
		"POD_NAMESPACE=" + crossplaneNamespace,
		"ENABLE_WEBHOOKS=false",
		"CRDS_PATH=" + filepath.Join(p.versions.crossplane.Dir, "cluster", "crds"),
		"TLS_CA_SECRET_NAME=" + rootCASecret,
		"TLS_CLIENT_SECRET_NAME=" + clientTLSSecret,
	}
	// The first init can fail until the Lock CRD it installs is served.
	if err := retryCommand(ctx, 6, func() ([]byte, error) {
		cmd := exec.CommandContext(ctx, xpBin, "core", "init") //nolint:gosec // built by hack/ensure-tools.sh.
		cmd.Env = append(os.Environ(), env...)
		return cmd.CombinedOutput()
	}); err != nil {
		return errors.Wrap(err, "crossplane core init failed")
	}

	ca, clientDir, err := p.crossplaneTLS(ctx)
	if err != nil {
		return err
	}
	cacheDir := filepath.Join(p.dir, "xpkg")
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return errors.Wrap(err, "cannot create the package cache")
	}
	endpoints := map[string]string{}
	digests := map[string]string{}
	for _, f := range p.versions.functions {
		digest, err := cachePackage(cacheDir, f)
		if err != nil {
			return err
		}
		digests[f.FunctionName()] = digest
		certs := filepath.Join(p.dir, "tls", f.Name())
		if err := ca.serve(certs, f.Name()); err != nil {
			return err
		}
		port, err := freePort()
		if err != nil {
			return err
		}
		proc, err := startProcess(p.dir, f.Name(), envtest.Tool(f.Name(), f.Version), []string{"TLS_SERVER_CERTS_DIR=" + certs},
			"--address="+hostPort(port))
		if err != nil {
			return err
		}
		p.procs = append(p.procs, proc)
		if err := proc.waitFor(ctx, 30*time.Second, func() bool { return dialable(hostPort(port)) }); err != nil {
			return err
		}
		endpoints[f.FunctionName()] = hostPort(port)
	}

	metrics, err := freePort()
	if err != nil {
		return err
	}
	health, err := freePort()
	if err != nil {
		return err
	}
	core, err := startProcess(p.dir, "crossplane", xpBin, append(env, "TLS_CLIENT_CERTS_DIR="+clientDir),
		"--debug", "core", "start", "--package-runtime=External", "--enable-webhooks=false",
		"--cache-dir="+cacheDir, fmt.Sprintf("--metrics-port=%d", metrics), fmt.Sprintf("--health-probe-port=%d", health),
		"--poll-interval=10s", "--sync-interval=1m")
	if err != nil {
		return err
	}
	p.procs = append(p.procs, core)
	if err := core.waitHealthy(ctx, fmt.Sprintf("http://%s/healthz", hostPort(health)), 2*time.Minute); err != nil {
		return err
	}

	for _, f := range p.versions.functions {
		if err := p.installFunction(ctx, core, f, digests[f.FunctionName()], endpoints[f.FunctionName()], filepath.Join(p.dir, "tls", f.Name())); err != nil {
			return err
		}
	}
	return nil
}

// crossplaneTLS reads the CA and client certificate `core init` created; the
// client certificate goes where `core start` reads it.
func (p *Plane) crossplaneTLS(ctx context.Context) (*authority, string, error) {
	read := func(n string) (*corev1.Secret, error) {
		s := &corev1.Secret{}
		err := p.client.Get(ctx, client.ObjectKey{Namespace: crossplaneNamespace, Name: n}, s)
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
	dir := filepath.Join(p.dir, "tls", "crossplane-client")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", errors.Wrap(err, "cannot create the client certificate directory")
	}
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if err := os.WriteFile(filepath.Join(dir, k), cl.Data[k], 0o600); err != nil {
			return nil, "", errors.Wrapf(err, "cannot write %s", k)
		}
	}
	return ca, dir, nil
}

// cachePackage places a function's package metadata in Crossplane's package
// cache under the key Crossplane computes for its reference, so a Function
// with packagePullPolicy Never installs without a registry. It returns the
// digest the Function must reference.
func cachePackage(dir string, f packages.Dependency) (string, error) {
	mod, err := envtest.DownloadModule(packages.Modules[f.Package], f.Version)
	if err != nil {
		return "", err
	}
	meta, err := os.ReadFile(filepath.Join(mod, "package", "crossplane.yaml")) //nolint:gosec // module cache.
	if err != nil {
		return "", errors.Wrapf(err, "cannot read the package metadata of %s", f.Name())
	}
	sum := sha256.Sum256(meta)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	f2, err := os.Create(filepath.Join(dir, cacheKey(f.Package, digest)+".gz")) //nolint:gosec // the plane's cache.
	if err != nil {
		return "", errors.Wrapf(err, "cannot cache the package of %s", f.Name())
	}
	defer f2.Close() //nolint:errcheck // checked on the happy path.
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

// installFunction creates the Function and, once Crossplane has made its
// revision, does what the package runtime would: stores the function's
// serving certificate in a Secret and records it, and the endpoint of the
// running binary, in the revision's status. With the External runtime
// Crossplane leaves both to whoever runs the function.
func (p *Plane) installFunction(ctx context.Context, core *process, f packages.Dependency, digest, endpoint, certs string) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: crossplaneNamespace, Name: f.FunctionName() + "-tls-server"}, Data: map[string][]byte{}}
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
		b, err := os.ReadFile(filepath.Join(certs, k)) //nolint:gosec // the plane's own certificates.
		if err != nil {
			return errors.Wrapf(err, "cannot read %s", k)
		}
		secret.Data[k] = b
	}
	if err := p.client.Create(ctx, secret); err != nil && !kerrors.IsAlreadyExists(err) {
		return errors.Wrapf(err, "cannot create Secret %s", secret.Name)
	}
	fn := &pkgv1.Function{ObjectMeta: metav1.ObjectMeta{Name: f.FunctionName()}}
	fn.Spec.Package = f.Package + "@" + digest
	fn.Spec.PackagePullPolicy = ptr.To(corev1.PullNever)
	if err := p.client.Create(ctx, fn); err != nil && !kerrors.IsAlreadyExists(err) {
		return errors.Wrapf(err, "cannot create Function %s", f.FunctionName())
	}

	// Crossplane creates the active revision from the cached package.
	revisions := func() []pkgv1.FunctionRevision {
		l := &pkgv1.FunctionRevisionList{}
		if err := p.client.List(ctx, l, client.MatchingLabels{"pkg.crossplane.io/package": f.FunctionName()}); err != nil {
			return nil
		}
		return l.Items
	}
	var rev client.ObjectKey
	if err := core.waitFor(ctx, time.Minute, func() bool {
		for _, r := range revisions() {
			if r.GetDesiredState() == pkgv1.PackageRevisionActive {
				rev = client.ObjectKeyFromObject(&r)
				return true
			}
		}
		return false
	}); err != nil {
		return errors.Wrapf(err, "Crossplane made no active revision of Function %s", f.FunctionName())
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r := &pkgv1.FunctionRevision{}
		if err := p.client.Get(ctx, rev, r); err != nil {
			return err
		}
		r.Status.Endpoint = endpoint
		r.Status.TLSServerSecretName = &secret.Name
		r.SetConditions(xpv2.Condition{Type: pkgv1.TypeRuntimeHealthy, Status: corev1.ConditionTrue, Reason: "HealthyPackageRevision",
			Message: "running as a local process of the CAPXP plane", LastTransitionTime: metav1.Now()})
		return p.client.Status().Update(ctx, r)
	}); err != nil {
		return errors.Wrapf(err, "cannot record the endpoint of Function %s", f.FunctionName())
	}
	var seen string
	if err := core.waitFor(ctx, time.Minute, func() bool {
		r := &pkgv1.FunctionRevision{}
		if err := p.client.Get(ctx, rev, r); err != nil {
			return false
		}
		seen = fmt.Sprintf("%+v", r.Status.Conditions)
		return r.GetCondition(pkgv1.TypeRevisionHealthy).Status == corev1.ConditionTrue && r.Status.Endpoint == endpoint
	}); err != nil {
		return errors.Wrapf(err, "the revision of Function %s did not become healthy (conditions %s)", f.FunctionName(), seen)
	}
	return nil
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
