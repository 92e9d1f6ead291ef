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
	// the API server's time handling writes (create, update, patch,
	// apply, delete: admission, storage and all) and their count, by
	// kind of object written: "write seconds RESOURCE", "write count
	// RESOURCE", the resource group-qualified, with its subresource.
	writeSeconds = "write seconds "
	writeCount   = "write count "
)

// writeVerbs are the verbs of apiserver_request_duration_seconds that
// write.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true}

// writtenKind names what a request wrote: resource.group[/subresource].
func writtenKind(m *dto.Metric) string {
	k := label(m, "resource")
	if g := label(m, "group"); g != "" {
		k += "." + g
	}
	if s := label(m, "subresource"); s != "" {
		k += "/" + s
	}
	return k
}

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
	for _, m := range families["apiserver_request_duration_seconds"].GetMetric() {
		if !writeVerbs[label(m, "verb")] {
			continue
		}
		h := m.GetHistogram()
		out[writeSeconds+writtenKind(m)] += h.GetSampleSum()
		out[writeCount+writtenKind(m)] += float64(h.GetSampleCount())
	}
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

// writeLines are the writes per Machine by kind of object written, with
// the API server's time handling them per Machine, the most time first.
func (s serverMetrics) writeLines(machines int) []string {
	kinds := s.names(writeSeconds)
	slices.SortStableFunc(kinds, func(a, b string) int {
		switch x, y := s[writeSeconds+a], s[writeSeconds+b]; {
		case x > y:
			return -1
		case x < y:
			return 1
		}
		return 0
	})
	n := float64(machines)
	out := make([]string, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, fmt.Sprintf("%s %.1f (%.2f ms)", k, s[writeCount+k]/n, 1000*s[writeSeconds+k]/n))
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
