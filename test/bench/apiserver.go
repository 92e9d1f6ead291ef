package bench

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// serverMetrics are the API server's own counters, read from its /metrics,
// that say where its CPU went: admission by plugin and by policy, reads,
// watch events. Each value is a sum of the series named by its key.
type serverMetrics map[string]float64

// The series a level's report reads, by the key serverMetrics keeps them
// under.
const (
	// admission time and count by plugin ("ValidatingAdmissionPolicy",
	// "MutatingAdmissionPolicy", ...): "plugin seconds NAME", "plugin
	// count NAME".
	pluginSeconds = "plugin seconds "
	pluginCount   = "plugin count "
	// a policy's validations or mutations, run once its match conditions
	// matched: "check seconds POLICY", "check count POLICY".
	checkSeconds = "check seconds "
	checkCount   = "check count "
	// a policy's match conditions, evaluated for every request its
	// constraints match: "match seconds POLICY", "match count POLICY".
	matchSeconds = "match seconds "
	matchCount   = "match count "
	// requests by verb ("get", "list", "watch", "post", "apply", ...): "verb
	// VERB"; watch events sent, in all and by resource: "watch events",
	// "watch events RESOURCE".
	verbCount   = "verb "
	watchEvents = "watch events"
)

// scrapeServer reads the API server's metrics.
func scrapeServer(ctx context.Context, cfg *rest.Config) (serverMetrics, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the API server's metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	return readServer(families), nil
}

// readServer keeps the series a report reads.
func readServer(families map[string]*dto.MetricFamily) serverMetrics {
	out := serverMetrics{}
	histogram := func(family, by, seconds, count string) {
		for _, m := range families[family].GetMetric() {
			h := m.GetHistogram()
			out[seconds+label(m, by)] += h.GetSampleSum()
			out[count+label(m, by)] += float64(h.GetSampleCount())
		}
	}
	histogram("apiserver_admission_controller_admission_duration_seconds", "name", pluginSeconds, pluginCount)
	histogram("apiserver_validating_admission_policy_check_duration_seconds", "policy", checkSeconds, checkCount)
	histogram("apiserver_mutating_admission_policy_check_duration_seconds", "policy", checkSeconds, checkCount)
	histogram("apiserver_admission_match_condition_evaluation_seconds", "name", matchSeconds, matchCount)
	for _, m := range families["apiserver_request_total"].GetMetric() {
		out[verbCount+strings.ToLower(label(m, "verb"))] += m.GetCounter().GetValue()
	}
	for _, m := range families["apiserver_watch_events_total"].GetMetric() {
		out[watchEvents] += m.GetCounter().GetValue()
		out[watchEvents+" "+label(m, "resource")] += m.GetCounter().GetValue()
	}
	return out
}

// since is what the counters grew by from before.
func (s serverMetrics) since(before serverMetrics) serverMetrics {
	out := serverMetrics{}
	for k, v := range s {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// names are the label values of the series starting with prefix, sorted.
func (s serverMetrics) names(prefix string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(s)) {
		if name, ok := strings.CutPrefix(k, prefix); ok {
			out = append(out, name)
		}
	}
	return out
}

// admissionLines are the admission plugins' and each policy's time and
// evaluations per Machine, busiest first.
func (s serverMetrics) admissionLines(machines int) []string {
	n := float64(machines)
	var out []string
	for _, name := range s.names(pluginSeconds) {
		out = append(out, fmt.Sprintf("%s %.2f ms (%.1f requests)", name, 1000*s[pluginSeconds+name]/n, s[pluginCount+name]/n))
	}
	policies := map[string]bool{}
	for _, p := range append(s.names(checkSeconds), s.names(matchSeconds)...) {
		policies[p] = true
	}
	for _, p := range slices.Sorted(maps.Keys(policies)) {
		out = append(out, fmt.Sprintf("%s: match conditions %.3f ms (%.1f), validations or mutations %.3f ms (%.1f)", p,
			1000*s[matchSeconds+p]/n, s[matchCount+p]/n, 1000*s[checkSeconds+p]/n, s[checkCount+p]/n))
	}
	return out
}

// watchLines are the watch events sent per Machine by resource, most
// first.
func (s serverMetrics) watchLines(machines int) []string {
	resources := s.names(watchEvents + " ")
	slices.SortStableFunc(resources, func(a, b string) int {
		return int(s[watchEvents+" "+b] - s[watchEvents+" "+a])
	})
	out := make([]string, 0, len(resources))
	for _, r := range resources {
		out = append(out, fmt.Sprintf("%s=%.1f", r, s[watchEvents+" "+r]/float64(machines)))
	}
	return out
}

// label is the value of a metric's label name.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
