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
		"Once": {
			reason: "each level once, in the report's order",
			in:     "L0,L2,L2-reported",
			want:   []string{"L0", "L2", "L2-reported"},
		},
		"Default": {
			reason: "the default runs the levels forward, then backward",
			in:     *orderFlag,
			want:   []string{"L0", "L2", "L2-reported", "L2-reported", "L2", "L0"},
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
		"Unequal": {
			reason:  "a level run more often than another would weigh more in its sum",
			in:      "L0,L2,L2-reported,L0",
			wantErr: `-order: "L0,L2,L2-reported,L0" runs L0 2 times and L2 1: every level (L0, L2, L2-reported) runs as many times as the others`,
		},
		"Missing": {
			reason:  "every level runs: the report compares each with L0",
			in:      "L2,L0",
			wantErr: `-order: "L2,L0" runs L2 1 times and L2-reported 0: every level (L0, L2, L2-reported) runs as many times as the others`,
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

func TestRatios(t *testing.T) {
	run := func(level string, ran int, tAll, apiServer time.Duration) result {
		return result{level: level, ran: ran, machines: 10, tAll: tAll, p99: tAll / 2, apiServerCPU: apiServer, controllersCPU: apiServer,
			provider: newRequests(), capi: newRequests(), engine: newRequests()}
	}
	cases := map[string]struct {
		reason string
		rs     []result
		want   string
	}{
		"Once": {
			reason: "each level once: the ratios are the runs'",
			rs: []result{run("L0", 1, 100*time.Second, 50*time.Second), run("L2", 2, 105*time.Second, 60*time.Second),
				run("L2-reported", 3, 120*time.Second, 55*time.Second)},
			want: "\nL2/L0: T_all 1.05, p99 1.05, API server + etcd CPU 1.20, controllers' CPU 1.20; provider writes per Machine L0 +0.00\n" +
				"goals for L2 (set for N = 1000): T_all <= 1.1 x L0: met; API server + etcd CPU <= 1.15 x L0: NOT MET; p99 <= 1.2 x L0: met; writes per Machine <= L0 + 1: met\n" +
				"\nL2-reported/L0: T_all 1.20, p99 1.20, API server + etcd CPU 1.10, controllers' CPU 1.10; provider writes per Machine L0 +0.00\n" +
				"goals for L2-reported (set for N = 1000): T_all <= 1.1 x L0: NOT MET; API server + etcd CPU <= 1.15 x L0: met; p99 <= 1.2 x L0: met; writes per Machine <= L0 + 1: met\n",
		},
		"ForwardThenBackward": {
			reason: "a level that ran twice is compared over the sum of its runs, L0's fast first and slow last run together",
			rs: []result{run("L0", 1, 80*time.Second, 40*time.Second), run("L2", 2, 100*time.Second, 50*time.Second),
				run("L2-reported", 3, 110*time.Second, 55*time.Second), run("L2-reported", 4, 110*time.Second, 55*time.Second),
				run("L2", 5, 100*time.Second, 50*time.Second), run("L0", 6, 120*time.Second, 60*time.Second)},
			want: "\nL2/L0 (over 2 runs each): T_all 1.00, p99 1.00, API server + etcd CPU 1.00, controllers' CPU 1.00; provider writes per Machine L0 +0.00\n" +
				"goals for L2 (set for N = 1000): T_all <= 1.1 x L0: met; API server + etcd CPU <= 1.15 x L0: met; p99 <= 1.2 x L0: met; writes per Machine <= L0 + 1: met\n" +
				"\nL2-reported/L0 (over 2 runs each): T_all 1.10, p99 1.10, API server + etcd CPU 1.10, controllers' CPU 1.10; provider writes per Machine L0 +0.00\n" +
				"goals for L2-reported (set for N = 1000): T_all <= 1.1 x L0: met; API server + etcd CPU <= 1.15 x L0: met; p99 <= 1.2 x L0: met; writes per Machine <= L0 + 1: met\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ratios(sums(tc.rs)); got != tc.want {
				t.Errorf("%s\nratios(sums(...)):\n got %s\nwant %s", tc.reason, got, tc.want)
			}
		})
	}
}

func TestByLevel(t *testing.T) {
	rs := []result{{level: "L0", ran: 1}, {level: "L2", ran: 2}, {level: "L2-reported", ran: 3}, {level: "L2-reported", ran: 4}, {level: "L2", ran: 5}, {level: "L0", ran: 6}}
	var got []string
	for _, r := range byLevel(rs) {
		got = append(got, r.name(true))
	}
	want := []string{"L0 (run 1)", "L0 (run 6)", "L2 (run 2)", "L2 (run 5)", "L2-reported (run 3)", "L2-reported (run 4)"}
	if !slices.Equal(got, want) {
		t.Errorf("byLevel shows L0's runs first, each level's in the order they ran:\n got %q\nwant %q", got, want)
	}
}

func TestRunOrder(t *testing.T) {
	rs := []result{{level: "L0", ran: 3}, {level: "L2", ran: 1}, {level: "L2-reported", ran: 2}}
	if got, want := runOrder(rs), "L2 → L2-reported → L0"; got != want {
		t.Errorf("runOrder names the levels as they ran:\n got %s\nwant %s", got, want)
	}
}
