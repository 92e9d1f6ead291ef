package bench

import (
	"testing"
	"time"

	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
)

func TestMachineLine(t *testing.T) {
	cases := map[string]struct {
		reason string
		r      result
		want   string
	}{
		"OthersRan": {
			reason: "what the machine was busy with beyond the benchmark is every other process's",
			r: result{apiServerCPU: 60 * time.Second, controllersCPU: 30 * time.Second,
				machine: plane.MachineCPU{Busy: 100 * time.Second, Idle: 20 * time.Second, Stolen: 2500 * time.Millisecond}},
			want: "busy 100.0 s (the benchmark, its API server and etcd 90.0 s, every other process 10.0 s), taken by the host 2.5 s, idle 20.0 s",
		},
		"TicksRoundDown": {
			reason: "counters read at different moments never leave other processes less than nothing",
			r: result{apiServerCPU: 60 * time.Second, controllersCPU: 30100 * time.Millisecond,
				machine: plane.MachineCPU{Busy: 90 * time.Second}},
			want: "busy 90.0 s (the benchmark, its API server and etcd 90.1 s, every other process 0.0 s), taken by the host 0.0 s, idle 0.0 s",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.r.machineLine(); got != tc.want {
				t.Errorf("%s\nmachineLine():\n got %s\nwant %s", tc.reason, got, tc.want)
			}
		})
	}
}
