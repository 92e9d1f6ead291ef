package controllers

import (
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metricsql"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/xr"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
)

// crossplaneSeries are the series of Crossplane core the alerts and the
// dashboard read (internal/circuit in the crossplane module, registered by
// `crossplane core start`).
var crossplaneSeries = map[string]bool{"circuit_breaker_opens_total": true}

// TestMonitoringReadsRealSeries checks the shipped alerts and dashboard: each
// expression parses, and each series it reads is one the manager registers
// (the bridge's own, controller-runtime's) or one of Crossplane core's; each
// alert has a severity, a summary, a description and a runbook section in
// docs/operating.md.
func TestMonitoringReadsRealSeries(t *testing.T) {
	served := registered(t)
	operating, err := os.ReadFile("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, l := range strings.Split(string(operating), "\n") {
		if h, ok := strings.CutPrefix(l, "### "); ok {
			anchors[strings.ToLower(strings.TrimSpace(h))] = true
		}
	}
	check := func(where, expr string) {
		t.Helper()
		// Grafana's variables, as Grafana substitutes them.
		expr = strings.NewReplacer("$__rate_interval", "5m", "$job", ".*").Replace(expr)
		e, err := metricsql.Parse(expr)
		if err != nil {
			t.Errorf("%s: %q does not parse: %v", where, expr, err)
			return
		}
		n := 0
		metricsql.VisitAll(e, func(x metricsql.Expr) {
			me, ok := x.(*metricsql.MetricExpr)
			if !ok {
				return
			}
			for _, lfs := range me.LabelFilterss {
				for _, lf := range lfs {
					if lf.Label != "__name__" {
						continue
					}
					n++
					if name := lf.Value; !served[seriesFamily(name)] && !crossplaneSeries[name] {
						t.Errorf("%s: reads %s, which nothing serves", where, name)
					}
				}
			}
		})
		if n == 0 {
			t.Errorf("%s: %q reads no series", where, expr)
		}
	}

	var rule struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Alert       string            `json:"alert"`
					Expr        string            `json:"expr"`
					For         string            `json:"for"`
					Labels      map[string]string `json:"labels"`
					Annotations map[string]string `json:"annotations"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	b, err := capxp.Manifests.ReadFile(path.Join(capxp.MonitoringDir, "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &rule); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	if rule.APIVersion != "monitoring.coreos.com/v1" || rule.Kind != "PrometheusRule" {
		t.Errorf("alerts.yaml is a %s %s, want a monitoring.coreos.com/v1 PrometheusRule", rule.APIVersion, rule.Kind)
	}
	alerts := 0
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			alerts++
			where := "alert " + r.Alert
			check(where, r.Expr)
			if r.Labels["severity"] == "" {
				t.Errorf("%s has no severity", where)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s has no %s", where, a)
				}
			}
			if _, anchor, _ := strings.Cut(r.Annotations["runbook_url"], "#"); !anchors[anchor] || !strings.EqualFold(anchor, r.Alert) {
				t.Errorf("%s: runbook %q is not docs/operating.md's section on it", where, r.Annotations["runbook_url"])
			}
		}
	}
	if alerts < 4 {
		t.Errorf("alerts.yaml has %d alerts, want at least 4", alerts)
	}

	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if b, err = capxp.Manifests.ReadFile(path.Join(capxp.MonitoringDir, "dashboard.json")); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dashboard); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	read := map[string]bool{}
	for _, p := range dashboard.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, q := range p.Targets {
			check("panel "+p.Title, q.Expr)
			for _, m := range regexp.MustCompile(`capxp_[a-z_]+`).FindAllString(q.Expr, -1) {
				read[seriesFamily(m)] = true
			}
		}
	}
	// Every series of the bridge's own is on the dashboard.
	for name := range served {
		if strings.HasPrefix(name, "capxp_") && !read[name] {
			t.Errorf("the dashboard shows no panel of %s", name)
		}
	}
}

// registered names the metric families the manager's registry serves.
func registered(t *testing.T) map[string]bool {
	t.Helper()
	// The XR controllers register their own collector (one per manager) as
	// they are made; neither needs the API server until it starts.
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := xr.NewControllers(mgr, controller.Options{}, "", nil, nil); err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc)
	go func() {
		metrics.Registry.(prometheus.Collector).Describe(ch)
		close(ch)
	}()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	out := map[string]bool{}
	for d := range ch {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			out[m[1]] = true
		}
	}
	if len(out) == 0 {
		t.Fatal("the manager's registry describes no metric")
	}
	return out
}

// seriesFamily is the family a series name belongs to: a histogram's
// buckets, sum and count are its own.
func seriesFamily(name string) string {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := strings.CutSuffix(name, s); ok {
			return f
		}
	}
	return name
}

// TestAlertsFireOnTheirSeries runs promtool's rule unit tests
// (config/monitoring/alerts_test.yaml) on the groups of the shipped
// PrometheusRule: each alert fires on the series it is written for, with its
// labels and annotations, and not on a healthy one. promtool is Debian's
// Prometheus package's (hack/ensure-tools.sh prometheus).
func TestAlertsFireOnTheirSeries(t *testing.T) {
	dir := tools.Dir(filepath.Join("..", ".cache", "tools"))
	if d := os.Getenv(tools.EnvDir); d != "" {
		dir = tools.Dir(d)
	}
	promtool, err := filepath.Abs(filepath.Join(string(dir), "prometheus-"+prometheusVersion, "promtool"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(promtool); err != nil {
		t.Fatalf("promtool is missing (%v): run hack/ensure-tools.sh prometheus", err)
	}
	raw, err := capxp.Manifests.ReadFile(path.Join(capxp.MonitoringDir, "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &rule); err != nil {
		t.Fatal(err)
	}
	rules, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	tests, err := capxp.Manifests.ReadFile(path.Join(capxp.MonitoringDir, "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	for name, b := range map[string][]byte{"rules.yaml": rules, "alerts_test.yaml": tests} {
		if err := os.WriteFile(filepath.Join(work, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(t.Context(), promtool, "test", "rules", "alerts_test.yaml")
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules did not say SUCCESS:\n%s", out)
	}
}

// prometheusVersion is the Prometheus hack/ensure-tools.sh stages.
const prometheusVersion = "v2.42.0"
