package plane

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// The files of a serving certificate, as Kubernetes TLS Secrets and
// Crossplane's and controller-runtime's certificate folders name them.
const (
	tlsCert = "tls.crt"
	tlsKey  = "tls.key"
	tlsCA   = "ca.crt"
)

// authority signs serving certificates.
type authority struct {
	cert    *x509.Certificate
	key     any
	certPEM []byte
}

// newAuthority creates a self-signed certificate authority.
func newAuthority(name string) (*authority, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, errors.Wrap(err, "cannot generate a CA key")
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, errors.Wrap(err, "cannot create a CA certificate")
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, errors.Wrap(err, "cannot parse the CA certificate")
	}
	return &authority{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// keyPEM is the authority's key, PKCS #8 in PEM.
func (a *authority) keyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(a.key)
	if err != nil {
		return nil, errors.Wrap(err, "cannot encode the CA key")
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// loadAuthority reads a CA from PEM (Crossplane's root CA secret).
func loadAuthority(certPEM, keyPEM []byte) (*authority, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("the CA is not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, errors.Wrap(err, "cannot parse the CA certificate")
	}
	var key any
	if key, err = x509.ParsePKCS1PrivateKey(kb.Bytes); err != nil {
		if key, err = x509.ParsePKCS8PrivateKey(kb.Bytes); err != nil {
			return nil, errors.Wrap(err, "cannot parse the CA key")
		}
	}
	return &authority{cert: cert, key: key, certPEM: certPEM}, nil
}

// serve writes tls.crt, tls.key and ca.crt for a server on loopback into dir,
// named name and any other DNS names given.
func (a *authority) serve(dir, name string, more ...string) error {
	certPEM, keyPEM, err := a.issue(name, x509.ExtKeyUsageServerAuth, append([]string{"localhost", name}, more...)...)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return errors.Wrap(err, "cannot create a certificate directory")
	}
	files := map[string][]byte{tlsCert: certPEM, tlsKey: keyPEM, tlsCA: a.certPEM}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			return errors.Wrapf(err, "cannot write %s", n)
		}
	}
	return nil
}

// issue signs a certificate for name with the usage given (and, for a
// server, its DNS names and loopback), and returns it and its key as PEM.
func (a *authority) issue(name string, usage x509.ExtKeyUsage, dnsNames ...string) ([]byte, []byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, errors.Wrap(err, "cannot generate a key")
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, errors.Wrap(err, "cannot generate a serial number")
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     dnsNames,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, errors.Wrapf(err, "cannot sign a certificate for %s", name)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), nil
}
