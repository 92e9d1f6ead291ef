// Package function serves CAPXP's composition functions inside a process
// that is not the function's own binary: the local plane and `capxp
// composition check` call them as Crossplane would, without building and
// starting another binary.
package function

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Server is a function serving gRPC on a loopback port.
type Server struct {
	// Address is where it serves (host:port).
	Address string
	srv     *grpc.Server
}

// Stop stops serving and closes every connection.
func (s *Server) Stop() { s.srv.Stop() }

// Serve serves fn on a free loopback port until ctx is done or Stop is
// called: with mutual TLS from certs (tls.crt, tls.key and the CA that signs
// its clients, ca.crt, as the SDK's MTLSCertificates reads them), or
// without TLS when certs is empty (`crossplane render` calls functions so).
func Serve(ctx context.Context, fn fnv1.FunctionRunnerServiceServer, certs string) (*Server, error) {
	creds := insecure.NewCredentials()
	if certs != "" {
		c, err := mutualTLS(certs)
		if err != nil {
			return nil, err
		}
		creds = c
	}
	lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, errors.Wrap(err, "cannot listen on loopback")
	}
	srv := grpc.NewServer(grpc.Creds(creds))
	fnv1.RegisterFunctionRunnerServiceServer(srv, fn)
	go func() { _ = srv.Serve(lis) }()
	go func() {
		<-ctx.Done()
		srv.Stop()
	}()
	return &Server{Address: lis.Addr().String(), srv: srv}, nil
}

// mutualTLS is the server side of Crossplane's mutual TLS with its
// functions.
func mutualTLS(dir string) (credentials.TransportCredentials, error) {
	crt, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		return nil, errors.Wrap(err, "cannot load the function's serving certificate")
	}
	ca, err := os.ReadFile(filepath.Clean(filepath.Join(dir, "ca.crt")))
	if err != nil {
		return nil, errors.Wrap(err, "cannot read the CA of the function's clients")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("the CA of the function's clients is not PEM")
	}
	return credentials.NewTLS(&tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{crt},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}), nil
}
