package install

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// prometheusVersion is the Prometheus hack/ensure-tools.sh stages (Debian's
// package).
const prometheusVersion = "v2.42.0"

// scrapeWithPrometheus runs a real Prometheus against the bridge's metrics
// endpoint as docs/operating.md says to (HTTPS, a service account token
// bound to capxp-system-metrics-reader), with the shipped alerts as its
// rules: the target is up, every query of the shipped dashboard is one
// Prometheus accepts, and the credentials alert fires once refuse (which
// makes the bridge refuse credentials) has run.
func scrapeWithPrometheus(ctx context.Context, t *testing.T, metricsURL, token string, refuse func()) {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join(string(tools.Dir(envtest.ToolsDir())), "prometheus-"+prometheusVersion, "prometheus"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("prometheus is missing (%v): run hack/ensure-tools.sh prometheus", err)
	}
	target, err := url.Parse(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	raw, err := capxp.Manifests.ReadFile(path.Join(capxp.MonitoringDir, "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &rule); err != nil {
		t.Fatal(err)
	}
	for _, g := range rule.Spec.Groups {
		g["interval"] = "1s" // evaluate as often as the test looks
	}
	rules, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [rules.yaml]
scrape_configs:
- job_name: capxp
  scheme: https
  metrics_path: %s
  # The manager's serving certificate is its own, self-signed.
  tls_config: {insecure_skip_verify: true}
  authorization: {credentials_file: token}
  static_configs: [{targets: [%q]}]
`, target.Path, target.Host)
	for name, b := range map[string][]byte{"prometheus.yaml": []byte(config), "rules.yaml": rules, "token": []byte(token)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "--config.file=prometheus.yaml", "--storage.tsdb.path=data", "--web.listen-address="+addr)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			if b, err := os.ReadFile(log.Name()); err == nil {
				t.Logf("prometheus's log:\n%s", b)
			}
		}
	})

	query := func(q string) ([]map[string]any, error) {
		var resp struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				Result []map[string]any `json:"result"`
			} `json:"data"`
		}
		if err := getJSON(ctx, "http://"+addr+"/api/v1/query?query="+url.QueryEscape(q), &resp); err != nil {
			return nil, err
		}
		if resp.Status != "success" {
			return nil, fmt.Errorf("%s: %s", q, resp.Error)
		}
		return resp.Data.Result, nil
	}
	eventually(t, "Prometheus scrapes the bridge", time.Minute, func() error {
		r, err := query(`up{job="capxp"} == 1`)
		if err != nil {
			return err
		}
		if len(r) != 1 {
			return fmt.Errorf("up: %v", r)
		}
		r, err = query(`capxp_xrd_adaptation{state="Adapted"}`)
		if err != nil || len(r) == 0 {
			return fmt.Errorf("no adapted XRD in what Prometheus scraped: %v %v", r, err)
		}
		return nil
	})
	// Every panel's query, as Grafana sends it.
	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	b, err := capxp.Manifests.ReadFile(path.Join(capxp.MonitoringDir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dashboard); err != nil {
		t.Fatal(err)
	}
	for _, p := range dashboard.Panels {
		for _, tg := range p.Targets {
			q := strings.NewReplacer("$__rate_interval", "1m", "$job", "capxp").Replace(tg.Expr)
			if _, err := query(q); err != nil {
				t.Errorf("dashboard panel %q: Prometheus refuses its query: %v", p.Title, err)
			}
		}
	}
	// A refusal after the first scrape: the alert on it fires.
	refuse()
	eventually(t, "the shipped CAPXPCredentialsRefused alert fires", 2*time.Minute, func() error {
		var resp struct {
			Data struct {
				Alerts []struct {
					Labels map[string]string `json:"labels"`
					State  string            `json:"state"`
				} `json:"alerts"`
			} `json:"data"`
		}
		if err := getJSON(ctx, "http://"+addr+"/api/v1/alerts", &resp); err != nil {
			return err
		}
		for _, a := range resp.Data.Alerts {
			if a.Labels["alertname"] == "CAPXPCredentialsRefused" && a.State == "firing" {
				t.Logf("Prometheus fires %v", a.Labels)
				return nil
			}
		}
		return fmt.Errorf("alerts: %+v", resp.Data.Alerts)
	})
}

// getJSON decodes a JSON response of a GET.
func getJSON(ctx context.Context, u string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(into)
}
