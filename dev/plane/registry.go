package plane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Registry is an OCI registry on loopback, serving TLS with a certificate
// of its own CA, as a platform's internal package mirror would. Crossplane
// is started to trust the CA (CA_BUNDLE_PATH); nothing else does.
type Registry struct {
	// Host is the registry's host:port, the first element of its
	// references.
	Host string
	// CAFile is the PEM file of the CA that signed its certificate.
	CAFile string

	srv    *http.Server
	client *http.Client
}

// startRegistry serves go-containerregistry's registry, its blobs kept in
// dir, on a free loopback port.
func startRegistry(ctx context.Context, dir string) (*Registry, error) {
	ca, err := newAuthority("capxp-plane-registry")
	if err != nil {
		return nil, err
	}
	certs := filepath.Join(dir, "tls")
	if err := ca.serve(certs, "capxp-plane-registry"); err != nil {
		return nil, err
	}
	blobs := filepath.Join(dir, "blobs")
	if err := os.MkdirAll(blobs, 0o700); err != nil {
		return nil, errors.Wrap(err, "cannot create the registry's blob folder")
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(certs, "tls.crt"), filepath.Join(certs, "tls.key"))
	if err != nil {
		return nil, errors.Wrap(err, "cannot load the registry's certificate")
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, errors.Wrap(err, "cannot listen for the registry")
	}
	r := &Registry{
		Host:   l.Addr().String(),
		CAFile: filepath.Join(certs, tlsCA),
		srv: &http.Server{
			Handler:           registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(blobs)), registry.Logger(log.New(io.Discard, "", 0))),
			TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
			ReadHeaderTimeout: 10 * time.Second,
		},
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.certPEM)
	r.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	go func() { _ = r.srv.ServeTLS(l, "", "") }()
	return r, nil
}

// Push uploads a package (an .xpkg file: an image tarball) as repo:tag,
// repo being a repository path under the registry's host.
func (r *Registry) Push(ctx context.Context, repo, tag, xpkg string) error {
	ref, err := name.NewTag(r.Host + "/" + repo + ":" + tag)
	if err != nil {
		return errors.Wrapf(err, "invalid package reference for %s", repo)
	}
	img, err := tarball.ImageFromPath(xpkg, nil)
	if err != nil {
		return errors.Wrapf(err, "cannot read package %s", xpkg)
	}
	return errors.Wrapf(remote.Write(ref, img, remote.WithContext(ctx), remote.WithTransport(r.client.Transport)),
		"cannot push %s", ref)
}

// Stop stops serving.
func (r *Registry) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}
