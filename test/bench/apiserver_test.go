package bench

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestWriteLines(t *testing.T) {
	series := func(lines ...string) string {
		return "# TYPE apiserver_request_duration_seconds histogram\n" + strings.Join(lines, "\n") + "\n"
	}
	cases := map[string]struct {
		metrics  string
		machines int
		want     []string
	}{
		"writes by kind, the most time first; reads and watches left out": {
			metrics: series(
				`apiserver_request_duration_seconds_bucket{verb="POST",group="",resource="secrets",subresource="",le="+Inf"} 10`,
				`apiserver_request_duration_seconds_sum{verb="POST",group="",resource="secrets",subresource=""} 0.02`,
				`apiserver_request_duration_seconds_count{verb="POST",group="",resource="secrets",subresource=""} 10`,
				`apiserver_request_duration_seconds_bucket{verb="PATCH",group="infrastructure.cluster.x-k8s.io",resource="crossplanemachines",subresource="status",le="+Inf"} 20`,
				`apiserver_request_duration_seconds_sum{verb="PATCH",group="infrastructure.cluster.x-k8s.io",resource="crossplanemachines",subresource="status"} 0.1`,
				`apiserver_request_duration_seconds_count{verb="PATCH",group="infrastructure.cluster.x-k8s.io",resource="crossplanemachines",subresource="status"} 20`,
				`apiserver_request_duration_seconds_bucket{verb="APPLY",group="infrastructure.cluster.x-k8s.io",resource="crossplanemachines",subresource="status",le="+Inf"} 10`,
				`apiserver_request_duration_seconds_sum{verb="APPLY",group="infrastructure.cluster.x-k8s.io",resource="crossplanemachines",subresource="status"} 0.05`,
				`apiserver_request_duration_seconds_count{verb="APPLY",group="infrastructure.cluster.x-k8s.io",resource="crossplanemachines",subresource="status"} 10`,
				`apiserver_request_duration_seconds_bucket{verb="GET",group="",resource="secrets",subresource="",le="+Inf"} 100`,
				`apiserver_request_duration_seconds_sum{verb="GET",group="",resource="secrets",subresource=""} 5`,
				`apiserver_request_duration_seconds_count{verb="GET",group="",resource="secrets",subresource=""} 100`,
				`apiserver_request_duration_seconds_bucket{verb="WATCH",group="",resource="secrets",subresource="",le="+Inf"} 1`,
				`apiserver_request_duration_seconds_sum{verb="WATCH",group="",resource="secrets",subresource=""} 60`,
				`apiserver_request_duration_seconds_count{verb="WATCH",group="",resource="secrets",subresource=""} 1`,
			),
			machines: 10,
			want: []string{
				"crossplanemachines.infrastructure.cluster.x-k8s.io/status 3.0 (15.00 ms)",
				"secrets 1.0 (2.00 ms)",
			},
		},
		"no writes": {
			metrics:  series(),
			machines: 10,
			want:     []string{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			parser := expfmt.NewTextParser(model.UTF8Validation)
			families, err := parser.TextToMetricFamilies(strings.NewReader(tc.metrics))
			if err != nil {
				t.Fatal(err)
			}
			got := readServer(families).writeLines(tc.machines)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("writeLines (-want +got):\n%s", d)
			}
		})
	}
}
