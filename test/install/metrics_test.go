package install

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
)

// scrapeMetrics reads the bridge's metrics as Prometheus would: from the
// pod's secured endpoint, found through the shipped ServiceMonitor and
// metrics Service, with a service account token bound to the
// shipped capxp-system-metrics-reader role. Without a token, or with one
// the role is not bound to, the endpoint refuses. Every series of the
// bridge is there, with the values of what the test did: the example
// provisioned, the tenant's attacks refused, and the example's cluster
// switched to credentials it was not granted and back.
func scrapeMetrics(ctx context.Context, t *testing.T, p *plane.Plane) {
	t.Helper()
	url := metricsThroughServiceMonitor(ctx, t, p, "crossplane-system")
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("the bridge's metrics endpoint is %q, want HTTPS", url)
	}
	admin := p.Management().Client
	cs, err := kubernetes.NewForConfig(p.Management().Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "monitoring"
	token := func(sa string) string {
		t.Helper()
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	// A verdict to count: the example's cluster switched to shared
	// credentials its namespace was not granted, until its Cluster says
	// so, then back. Legacy cluster-scoped credentials: the credentials
	// webhook refuses an ungranted ClusterProviderConfig outright, and the
	// policies admit and hold these.
	setRef := func(group, kind, name string) {
		t.Helper()
		xr := &unstructured.Unstructured{}
		xr.SetGroupVersionKind(infrav1.GroupVersion.WithKind("CrossplaneCluster"))
		xr.SetNamespace(plane.ExampleNamespace)
		xr.SetName(plane.ExampleCluster)
		raw := fmt.Sprintf(`{"spec":{"providerConfigRef":{"apiGroup":%q,"kind":%q,"name":%q}}}`, group, kind, name)
		if err := admin.Patch(ctx, xr, client.RawPatch(types.MergePatchType, []byte(raw))); err != nil {
			t.Fatal(err)
		}
	}
	setRef(k8sLegacyGroup, "ProviderConfig", legacyConfig)
	eventually(t, "the Cluster says its credentials are not granted", time.Minute, func() error {
		c := &clusterv1.Cluster{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: plane.ExampleNamespace, Name: plane.ExampleCluster}, c); err != nil {
			return err
		}
		if v := conditions.Get(c, infrav1.CrossplaneInfrastructureReadyCondition); v == nil || v.Reason != infrav1.ProviderConfigNotGrantedReason {
			return fmt.Errorf("%s: %v", infrav1.CrossplaneInfrastructureReadyCondition, v)
		}
		return nil
	})
	setRef(k8sGroup, "ProviderConfig", "workload")
	// An XR that waits: one of a cluster's (CAPI's cluster-name label, as
	// CAPI's clones carry before CAPI owns them), held for credentials its
	// namespace was not granted.
	held := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"providerConfigRef": map[string]any{"apiGroup": k8sLegacyGroup, "kind": "ProviderConfig", "name": legacyConfig},
	}}}
	held.SetGroupVersionKind(infrav1.GroupVersion.WithKind("CrossplaneCluster"))
	held.SetNamespace(ns)
	held.SetName("held")
	held.SetLabels(map[string]string{clusterv1.ClusterNameLabel: "held"})

	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prometheus"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stranger"}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "prometheus-capxp-metrics"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "capxp-system-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "prometheus"}},
		},
		held,
	} {
		createAs(ctx, t, admin, o)
	}
	// The endpoint's certificate is the manager's own, self-signed, as a
	// scraper without the pod's CA would skip verifying.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the manager's self-signed serving certificate.
	}}
	get := func(bearer string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	if code, _, err := get(""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("without a token: %d, %v; want 401", code, err)
	}
	stranger := token("stranger")
	eventually(t, "a token without the role is refused", 30*time.Second, func() error {
		if code, _, err := get(stranger); err != nil || code != http.StatusForbidden {
			return fmt.Errorf("%d, %v; want 403", code, err)
		}
		return nil
	})

	prometheus := token("prometheus")
	var families map[string]*dto.MetricFamily
	eventually(t, "the scraper reads every series of the bridge", time.Minute, func() error {
		code, body, err := get(prometheus)
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("%d, %v: %.200s", code, err, body)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		if families, err = parser.TextToMetricFamilies(strings.NewReader(body)); err != nil {
			return err
		}
		for _, want := range []struct {
			family string
			labels map[string]string
			// atLeast is the least the series' value (a histogram's
			// count) may be after what the test did.
			atLeast float64
		}{
			{"capxp_xr_ready_to_provisioned_seconds", map[string]string{"kind": "CrossplaneCluster"}, 1},
			{"capxp_xr_ready_to_provisioned_seconds", map[string]string{"kind": "CrossplaneMachine"}, plane.ExampleMachines},
			{"capxp_writes_total", map[string]string{"target": "xr_status", "kind": "CrossplaneMachine"}, plane.ExampleMachines},
			{"capxp_writes_total", map[string]string{"target": "xr", "kind": "CrossplaneMachine"}, plane.ExampleMachines},
			{"capxp_writes_total", map[string]string{"target": "owner_condition", "kind": "CrossplaneCluster"}, 1},
			{"capxp_verdicts_total", map[string]string{"reason": "NotGranted", "kind": "CrossplaneCluster"}, 1},
			{"capxp_credentials_refusals_total", map[string]string{"namespace": hostileNamespace, "reason": "NotGranted"}, 1},
			{"capxp_credentials_refusals_total", map[string]string{"namespace": plane.ExampleNamespace, "reason": "NotGranted"}, 1},
			{"capxp_xrd_adaptation", map[string]string{"xrd": "crossplaneclusters.infrastructure.cluster.x-k8s.io", "state": "Adapted"}, 1},
			{"capxp_xrd_adaptation", map[string]string{"xrd": "crossplanemachines.infrastructure.cluster.x-k8s.io", "state": "Adapted"}, 1},
			{"capxp_xr_wakeups_total", map[string]string{"kind": "CrossplaneMachine", "source": "CrossplaneMachine"}, plane.ExampleMachines},
			{"capxp_xr_wakeups_total", map[string]string{"kind": "CrossplaneMachine", "source": "Machine"}, plane.ExampleMachines},
			{"controller_runtime_reconcile_time_seconds", map[string]string{"controller": "capxp-crossplanemachine.infrastructure.cluster.x-k8s.io"}, 1},
			{"capxp_xrs_waiting", map[string]string{"kind": "CrossplaneCluster", "namespace": ns}, 1},
			{"capxp_xr_waiting_oldest_seconds", map[string]string{"kind": "CrossplaneCluster", "namespace": ns}, 0},
		} {
			got, ok := value(families[want.family], want.labels)
			if !ok || got < want.atLeast {
				return fmt.Errorf("%s%v: %v (present: %t), want at least %v", want.family, want.labels, got, ok, want.atLeast)
			}
		}
		return nil
	})
	// A real Prometheus scrapes the same endpoint with the shipped alerts;
	// a second held XR is a refusal it sees happen.
	again := &unstructured.Unstructured{Object: map[string]any{"spec": held.Object["spec"]}}
	again.SetGroupVersionKind(held.GroupVersionKind())
	again.SetNamespace(ns)
	again.SetName("held-again")
	scrapeWithPrometheus(ctx, t, url, prometheus, func() { createAs(ctx, t, admin, again) })
	if err := admin.Delete(ctx, again); err != nil {
		t.Fatal(err)
	}

	// The example is provisioned: none of its XRs waits. The held XR has
	// waited since the test created it, no longer.
	if v, ok := value(families["capxp_xrs_waiting"], map[string]string{"namespace": plane.ExampleNamespace}); ok {
		t.Errorf("capxp_xrs_waiting{namespace=%q} = %v, want no series: the example is provisioned", plane.ExampleNamespace, v)
	}
	if age, _ := value(families["capxp_xr_waiting_oldest_seconds"], map[string]string{"namespace": ns}); age > time.Since(held.GetCreationTimestamp().Time).Seconds()+1 {
		t.Errorf("capxp_xr_waiting_oldest_seconds{namespace=%q} = %v: older than the XR", ns, age)
	}
	// Once it is gone, so is its series.
	if err := admin.Delete(ctx, held); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a deleted XR no longer counts as waiting", time.Minute, func() error {
		code, body, err := get(prometheus)
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("%d, %v", code, err)
		}
		if strings.Contains(body, `capxp_xrs_waiting{kind="CrossplaneCluster",namespace="`+ns+`"}`) {
			return fmt.Errorf("capxp_xrs_waiting still counts it")
		}
		return nil
	})
	// Plausible latencies: every XR provisioned within the minutes the
	// test took, not at the bridge's clock's whim.
	for _, kind := range []string{"CrossplaneCluster", "CrossplaneMachine"} {
		for _, m := range families["capxp_xr_ready_to_provisioned_seconds"].GetMetric() {
			if labelsMatch(m, map[string]string{"kind": kind}) {
				h := m.GetHistogram()
				mean := h.GetSampleSum() / float64(h.GetSampleCount())
				t.Logf("capxp_xr_ready_to_provisioned_seconds{kind=%q}: %d observations, mean %.3fs", kind, h.GetSampleCount(), mean)
				if mean < 0 || mean > 600 {
					t.Errorf("%s: a mean Ready → provisioned of %.3fs is not plausible", kind, mean)
				}
			}
		}
	}
}

// value is a series' value, a histogram's count, in a family.
func value(f *dto.MetricFamily, labels map[string]string) (float64, bool) {
	var sum float64
	found := false
	for _, m := range f.GetMetric() {
		if !labelsMatch(m, labels) {
			continue
		}
		found = true
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, found
}

func labelsMatch(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}
