package bench

import (
	"slices"
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

func TestParseOrder(t *testing.T) {
	cases := map[string]struct {
		reason  string
		in      string
		want    []string
		wantErr string
	}{
		"Default": {
			reason: "the report's order is the default",
			in:     "L0,L2,L2-reported",
			want:   []string{"L0", "L2", "L2-reported"},
		},
		"Reversed": {
			reason: "any order of the three levels runs, spaces around the commas too",
			in:     "L2-reported, L2 ,L0",
			want:   []string{"L2-reported", "L2", "L0"},
		},
		"Unknown": {
			reason:  "a name that is not a level says which are",
			in:      "L0,L1,L2",
			wantErr: `-order: "L1" is not a level (the levels are L0, L2, L2-reported)`,
		},
		"Twice": {
			reason:  "a level runs once",
			in:      "L0,L2,L0",
			wantErr: "-order: level L0 is named twice",
		},
		"Missing": {
			reason:  "every level runs: the report compares each with L0",
			in:      "L2,L0",
			wantErr: `-order: "L2,L0" names 2 of the 3 levels (L0, L2, L2-reported): each runs once`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseOrder(tc.in)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr || !slices.Equal(got, tc.want) {
				t.Errorf("%s\nparseOrder(%q):\n got %q, %q\nwant %q, %q", tc.reason, tc.in, got, gotErr, tc.want, tc.wantErr)
			}
		})
	}
}

func TestRunOrder(t *testing.T) {
	rs := []result{{level: "L0", ran: 3}, {level: "L2", ran: 1}, {level: "L2-reported", ran: 2}}
	if got, want := runOrder(rs), "L2 → L2-reported → L0"; got != want {
		t.Errorf("runOrder names the levels as they ran:\n got %s\nwant %s", got, want)
	}
}
