package plane

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// serviceProxy takes a connection to a Service of the management cluster
// by its DNS name, <service>.<namespace>.svc[.cluster.local]:<port>, to the
// process the plane runs behind it (ServiceAddress), as a pod's resolver
// and the cluster's network would: an HTTP CONNECT proxy on loopback that
// the plane's own processes are pointed at with HTTPS_PROXY. CAPI's
// controllers call a runtime extension registered by Service (its
// ExtensionConfig's clientConfig.service) at that name, and check its
// serving certificate against it: the tunnel carries their TLS unopened.
// Go's HTTP clients never proxy loopback addresses, so nothing else these
// processes call goes through it. A name that is not a Service's, or a
// Service that reaches no pod, is refused with 502 and why.
type serviceProxy struct {
	resolve func(ctx context.Context, namespace, name, port string) (string, error)
}

// startServiceProxy serves a serviceProxy on a loopback port until the
// plane stops, and returns its URL (HTTPS_PROXY's value).
func (p *Plane) startServiceProxy(ctx context.Context) (string, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", errors.Wrap(err, "cannot listen for the Services' proxy")
	}
	srv := &http.Server{Handler: &serviceProxy{resolve: p.ServiceAddress}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	p.serviceProxy = srv
	return "http://" + ln.Addr().String(), nil
}

func (s *serviceProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "this proxy only tunnels (CONNECT) to Services", http.StatusMethodNotAllowed)
		return
	}
	namespace, name, port, err := serviceHost(r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	addr, err := s.resolve(r.Context(), namespace, name, port)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	upstream, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(r.Context(), "tcp", addr)
	if err != nil {
		http.Error(w, errors.Wrapf(err, "Service %s/%s", namespace, name).Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = upstream.Close()
		http.Error(w, "cannot tunnel on this connection", http.StatusInternalServerError)
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		_ = upstream.Close()
		return
	}
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		_ = conn.Close()
		_ = upstream.Close()
		return
	}
	// What the client sent after its CONNECT (buffered) goes first.
	go func() {
		_, _ = io.Copy(upstream, buf)
		_ = upstream.Close()
	}()
	_, _ = io.Copy(conn, upstream)
	_ = conn.Close()
}

// serviceHost reads a CONNECT target as a Service's DNS name:
// <service>.<namespace>.svc or <service>.<namespace>.svc.cluster.local,
// with a port (a name or a number, as a Service's port is looked up).
func serviceHost(target string) (namespace, name, port string, err error) {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return "", "", "", errors.Wrapf(err, "%q is not a host and port", target)
	}
	rest, ok := strings.CutSuffix(strings.TrimSuffix(host, "."), ".svc.cluster.local")
	if !ok {
		rest, ok = strings.CutSuffix(host, ".svc")
	}
	name, namespace, dotted := strings.Cut(rest, ".")
	if !ok || !dotted || name == "" || namespace == "" || strings.Contains(namespace, ".") {
		return "", "", "", errors.Errorf("%q is not a Service's name (<service>.<namespace>.svc)", host)
	}
	return namespace, name, port, nil
}
