package install

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// serviceMonitor is what a ServiceMonitor says of where to scrape.
type serviceMonitor struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port   string `json:"port"`
			Scheme string `json:"scheme"`
			Path   string `json:"path"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// metricsThroughServiceMonitor is the manager's metrics URL as Prometheus,
// told by the shipped ServiceMonitor, finds it: prometheus-operator's
// ServiceMonitor CRD is installed and the release's ServiceMonitor is
// applied in the manager's namespace as docs/operating.md says (the API
// server validates it); the Services of that namespace it selects are
// listed, and the port its endpoint names is followed to the manager's pod,
// as the cluster's network routes it (the plane stands in for that).
func metricsThroughServiceMonitor(ctx context.Context, t *testing.T, p *plane.Plane, namespace string) string {
	t.Helper()
	crds, err := tools.Dir(envtest.ToolsDir()).CRDs("prometheus-operator", plane.PrometheusOperatorVersion)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := crenvtest.InstallCRDs(p.Management().Config, crenvtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("cannot install prometheus-operator's CRDs: %v", err)
	}
	raw, err := capxp.Manifests.ReadFile(path.Join(capxp.MonitoringDir, "servicemonitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(string(raw))
	if len(objs) != 1 {
		t.Fatalf("servicemonitor.yaml holds %d objects, want 1", len(objs))
	}
	applied := objs[0]
	applied.SetNamespace(namespace)
	admin := p.Management().Client
	if err := admin.Create(ctx, applied); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("cannot apply the shipped ServiceMonitor in %s: %v", namespace, err)
	}
	sm := &serviceMonitor{}
	if err := yaml.Unmarshal(raw, sm); err != nil {
		t.Fatal(err)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("the shipped ServiceMonitor has %d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	selector, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	svcs := &corev1.ServiceList{}
	if err := admin.List(ctx, svcs, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		t.Fatal(err)
	}
	if len(svcs.Items) != 1 {
		t.Fatalf("the shipped ServiceMonitor selects %d Services in %s, want the manager's metrics Service", len(svcs.Items), namespace)
	}
	addr, err := p.ServiceAddress(ctx, namespace, svcs.Items[0].Name, ep.Port)
	if err != nil {
		t.Fatalf("the ServiceMonitor's endpoint reaches no manager: %v", err)
	}
	return fmt.Sprintf("%s://%s%s", ep.Scheme, addr, ep.Path)
}

// refusesAnonymousScrapes: the metrics endpoint at url answers over HTTPS,
// and refuses a scrape without a token (401).
func refusesAnonymousScrapes(ctx context.Context, t *testing.T, url string) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the manager's self-signed serving certificate, as the ServiceMonitor says.
	}}
	eventually(t, "the metrics endpoint the ServiceMonitor finds refuses an anonymous scrape", 30*time.Second, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			return fmt.Errorf("%s: %s, want 401", url, resp.Status)
		}
		return nil
	})
}
