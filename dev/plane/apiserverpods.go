package plane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// apiServerPodPort is the port kubeadm's kube-apiserver listens on, unless
// its configuration's LocalAPIEndpoint.BindPort says another.
const apiServerPodPort = 6443

// apiServerCommonName is the common name of the serving certificate kubeadm
// issues a control-plane host's kube-apiserver, which KubeadmControlPlane
// looks for when it records the certificate's expiry.
const apiServerCommonName = "kube-apiserver"

// serveAPIServerPods makes the kube-apiserver Pods of the workload cluster's
// simulated control-plane hosts answer on their port, as a kubelet's
// port-forward reaches a real one. KubeadmControlPlane dials each one that
// way to read when its serving certificate expires.
//
// Every such Pod stands for the workload cluster's one API server, so the
// plane listens once on loopback: TLS with a certificate named as kubeadm
// names the API server's, in front of a reverse proxy to the workload API
// server (client certificates do not pass through it; bearer tokens do).
// It returns a kwok ClusterPortForward (a --config file) that forwards
// every kube-system Pod's port 6443 there; kwok serves the port-forward
// the workload API server asks of a Node, at the address and port its
// node-initialize stage gave the Node (see startKwok).
func (p *Plane) serveAPIServerPods() (string, error) {
	ca, err := newAuthority("capxp-plane-workload-ca")
	if err != nil {
		return "", err
	}
	certPEM, keyPEM, err := ca.issue(apiServerCommonName, x509.ExtKeyUsageServerAuth, "localhost", "kubernetes", "kubernetes.default")
	if err != nil {
		return "", err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return "", errors.Wrap(err, "cannot load the kube-apiserver Pods' serving certificate")
	}
	workload, err := url.Parse(p.Workload.Config.Host)
	if err != nil {
		return "", errors.Wrap(err, "cannot parse the workload API server's address")
	}
	transport, err := rest.TransportFor(&rest.Config{Host: p.Workload.Config.Host, TLSClientConfig: rest.TLSClientConfig{
		CAFile: p.Workload.Config.CAFile, CAData: p.Workload.Config.CAData,
	}})
	if err != nil {
		return "", errors.Wrap(err, "cannot build a transport to the workload API server")
	}
	proxy := httputil.NewSingleHostReverseProxy(workload)
	proxy.Transport = transport

	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return "", errors.Wrap(err, "cannot listen for the kube-apiserver Pods")
	}
	p.apiServerPods = &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		_ = p.apiServerPods.Serve(tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}))
	}()

	forward := filepath.Join(p.dir, "kwok-kube-apiserver-port-forward.yaml")
	cfg := fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterPortForward
metadata:
  name: kube-apiserver
spec:
  selector:
    matchNamespaces: [kube-system]
  forwards:
  - ports: [%d]
    target:
      address: 127.0.0.1
      port: %d
`, apiServerPodPort, l.Addr().(*net.TCPAddr).Port)
	if err := os.WriteFile(forward, []byte(cfg), 0o600); err != nil {
		return "", errors.Wrap(err, "cannot write kwok's port-forward configuration")
	}
	return forward, nil
}
