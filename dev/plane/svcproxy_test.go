package plane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestServiceHost(t *testing.T) {
	cases := map[string]struct {
		target                string
		namespace, name, port string
		wantErr               bool
	}{
		"a Service's name and port":        {target: "ext.test-system.svc:443", namespace: "test-system", name: "ext", port: "443"},
		"the cluster domain":               {target: "ext.test-system.svc.cluster.local:9443", namespace: "test-system", name: "ext", port: "9443"},
		"a named port":                     {target: "ext.ns.svc:https", namespace: "ns", name: "ext", port: "https"},
		"no port":                          {target: "ext.ns.svc", wantErr: true},
		"not a Service":                    {target: "example.com:443", wantErr: true},
		"no namespace":                     {target: "ext.svc:443", wantErr: true},
		"a dotted namespace is not a name": {target: "ext.a.b.svc:443", wantErr: true},
		"a loopback address":               {target: "127.0.0.1:443", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns, n, port, err := serviceHost(tc.target)
			if (err != nil) != tc.wantErr {
				t.Fatalf("serviceHost(%q): error %v, want an error: %t", tc.target, err, tc.wantErr)
			}
			if err == nil && (ns != tc.namespace || n != tc.name || port != tc.port) {
				t.Errorf("serviceHost(%q) = %s, %s, %s; want %s, %s, %s", tc.target, ns, n, port, tc.namespace, tc.name, tc.port)
			}
		})
	}
}

// TestServiceProxy calls a TLS server through the proxy by a Service's name,
// as CAPI's runtime client calls an extension, and a name that reaches no
// pod.
func TestServiceProxy(t *testing.T) {
	backend := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "extension")
	}))
	defer backend.Close()
	resolve := func(_ context.Context, namespace, name, port string) (string, error) {
		if namespace == "test-system" && name == "ext" && port == "443" {
			return strings.TrimPrefix(backend.URL, "https://"), nil
		}
		return "", fmt.Errorf("Service %s/%s selects no pod", namespace, name)
	}
	proxy := httptest.NewServer(&serviceProxy{resolve: resolve})
	defer proxy.Close()
	proxyURL, _ := url.Parse(proxy.URL)
	roots := x509.NewCertPool()
	roots.AddCert(backend.Certificate())
	c := &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(proxyURL),
		// httptest's certificate is for example.com.
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "example.com", MinVersion: tls.VersionTLS12},
	}}

	cases := map[string]struct {
		url     string
		want    string
		wantErr string
	}{
		"a Service the plane runs a pod behind": {url: "https://ext.test-system.svc/hooks", want: "extension"},
		"a Service without a pod":               {url: "https://other.test-system.svc/hooks", wantErr: "Bad Gateway"},
		"a name that is not a Service's":        {url: "https://example.com/hooks", wantErr: "Bad Gateway"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("GET %s: error %v, want one saying %q", tc.url, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("GET %s: %v", tc.url, err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if string(b) != tc.want {
				t.Errorf("GET %s = %q, want %q", tc.url, b, tc.want)
			}
		})
	}
}
