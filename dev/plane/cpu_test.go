package plane

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseMachineCPU(t *testing.T) {
	cases := map[string]struct {
		reason  string
		line    string
		want    MachineCPU
		wantErr bool
	}{
		"Linux": {
			reason: "busy is user, nice, system, irq and softirq; idle takes in iowait; steal is the hypervisor's",
			line:   "cpu  700 100 200 5000 300 10 40 25 0 0",
			want:   MachineCPU{Busy: 10500 * time.Millisecond, Idle: 53 * time.Second, Stolen: 250 * time.Millisecond},
		},
		"NoSteal": {
			reason:  "a kernel that counts no steal column is not read as one",
			line:    "cpu  700 100 200 5000 300 10 40",
			wantErr: true,
		},
		"AnotherLine": {
			reason:  "only the machine's line, not a core's, is read",
			line:    "cpu0 700 100 200 5000 300 10 40 25 0 0",
			wantErr: true,
		},
		"NotANumber": {
			reason:  "a counter that does not parse is an error, not a zero",
			line:    "cpu  700 x 200 5000 300 10 40 25 0 0",
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseMachineCPU(tc.line)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nparseMachineCPU(%q): error %v, want error %t", tc.reason, tc.line, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nparseMachineCPU(%q): -want, +got:\n%s", tc.reason, tc.line, diff)
			}
		})
	}
}

func TestMachineCPUSub(t *testing.T) {
	before := MachineCPU{Busy: time.Second, Idle: 2 * time.Second, Stolen: 0}
	after := MachineCPU{Busy: 4 * time.Second, Idle: 3 * time.Second, Stolen: time.Second}
	if diff := cmp.Diff(MachineCPU{Busy: 3 * time.Second, Idle: time.Second, Stolen: time.Second}, after.Sub(before)); diff != "" {
		t.Errorf("Sub: -want, +got:\n%s", diff)
	}
}
