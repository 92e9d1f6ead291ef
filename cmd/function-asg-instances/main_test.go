package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestServe runs function-asg-instances as the Function package's runtime
// does (no arguments but the address, and no metrics
// server here; the serving certificate in TLS_SERVER_CERTS_DIR) and calls it as Crossplane does,
// with a client certificate of the CA it trusts; a client without one is
// refused.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := certificate(t, nil, nil, "crossplane-root-ca", true)
	server, serverKey := certificate(t, ca, caKey, "function-asg-instances", false)
	client, clientKey := certificate(t, ca, caKey, "crossplane", false)
	writePEM(t, filepath.Join(dir, "ca.crt"), "CERTIFICATE", ca.Raw)
	writePEM(t, filepath.Join(dir, "tls.crt"), "CERTIFICATE", server.Raw)
	writeKey(t, filepath.Join(dir, "tls.key"), serverKey)
	t.Setenv("TLS_SERVER_CERTS_DIR", dir)

	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	var stderr bytes.Buffer
	exited := make(chan int, 1)
	// Serves until the test binary exits: the SDK's server has no stop.
	// No metrics server: it would take port 8080, and register the
	// SDK's collectors once per test run.
	go func() {
		exited <- run([]string{"--address=" + addr, "--metrics-address="}, &stderr)
	}()
	for deadline := time.Now().Add(20 * time.Second); ; {
		c, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", addr)
		if err == nil {
			_ = c.Close()
			break
		}
		select {
		case code := <-exited:
			t.Fatalf("function-asg-instances exited %d: %s", code, stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("function-asg-instances does not listen on %s: %s", addr, stderr.String())
		}
	}

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	cases := map[string]struct {
		reason string
		certs  []tls.Certificate
		wantOK bool
	}{
		"Crossplane": {
			reason: "a client with a certificate of the CA in ca.crt is served",
			certs:  []tls.Certificate{{Certificate: [][]byte{client.Raw}, PrivateKey: clientKey}},
			wantOK: true,
		},
		"NoClientCertificate": {
			reason: "a client without a certificate is refused: the function serves mutual TLS only",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, Certificates: tc.certs, ServerName: "function-asg-instances"}
			if !tc.wantOK {
				// The server refuses the handshake with TLS's
				// certificate_required alert, which the client reads
				// (a write may find the connection already closed).
				err := refused(t, addr, cfg)
				if err == nil || !strings.Contains(err.Error(), "certificate required") {
					t.Errorf("%s: want the server to require a certificate, got %v", tc.reason, err)
				}
				return
			}
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			xr, err := structpb.NewStruct(map[string]any{"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "CrossplaneMachinePool",
				"metadata": map[string]any{"name": "pool", "namespace": "team-a"}})
			if err != nil {
				t.Fatal(err)
			}
			req := &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: xr}}}
			rsp, err := fnv1.NewFunctionRunnerServiceClient(conn).RunFunction(t.Context(), req)
			switch {
			case err != nil:
				t.Errorf("%s: RunFunction: %v (stderr: %s)", tc.reason, err, stderr.String())
			case len(rsp.GetResults()) != 0:
				t.Errorf("%s: RunFunction with no group observed: want no result, got %v", tc.reason, rsp.GetResults())
			}
		})
	}
}

// TestHelpAndBadArguments: --help lists every flag and exits 0; what the
// function does not take exits 2 and says why.
func TestHelpAndBadArguments(t *testing.T) {
	cases := map[string]struct {
		args []string
		code int
		says []string
	}{
		"Help":        {args: []string{"--help"}, code: 0, says: []string{"-address", "-network", "-tls-certs-dir", "-insecure", "-metrics-address", "-debug"}},
		"UnknownFlag": {args: []string{"--nope"}, code: 2, says: []string{"flag provided but not defined: -nope"}},
		"Argument":    {args: []string{"asg-instances"}, code: 2, says: []string{`unexpected argument "asg-instances"`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tc.args, &stderr); code != tc.code {
				t.Errorf("run(%v) = %d, want %d:\n%s", tc.args, code, tc.code, stderr.String())
			}
			for _, s := range tc.says {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("run(%v) printed no %q:\n%s", tc.args, s, stderr.String())
				}
			}
		})
	}
}

// refused is the error a TLS client gets from addr: from the handshake, or
// from the first read after it (TLS 1.3 servers judge the client's
// certificate after the client's side of the handshake is done).
func refused(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	d := tls.Dialer{Config: cfg}
	c, err := d.DialContext(t.Context(), "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = c.Read(make([]byte, 1))
	return err
}

// certificate is a certificate for name signed by parent (self-signed when
// nil), with its key.
func certificate(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, name string, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:         isCA, BasicConstraintsValid: true,
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeKey(t *testing.T, path string, key *ecdsa.PrivateKey) {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, path, "EC PRIVATE KEY", der)
}
