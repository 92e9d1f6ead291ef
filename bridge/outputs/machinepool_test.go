package outputs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func poolXR(spec map[string]any, ids any) *unstructured.Unstructured {
	status := map[string]any{}
	if ids != nil {
		status["outputs"] = map[string]any{"providerIDList": ids}
	}
	u := xr(spec, status)
	u.SetKind("CrossplaneMachinePool")
	return u
}

func TestMapMachinePool(t *testing.T) {
	replicas := func(n int64) map[string]any { return map[string]any{"replicas": n} }
	cases := map[string]struct {
		reason  string
		xr      *unstructured.Unstructured
		want    []string
		missing bool
		errs    []string
	}{
		"Reported": {
			reason: "the machines the composition reports map in its order",
			xr:     poolXR(replicas(2), []any{"aws:///eu-west-1a/i-2", "aws:///eu-west-1b/i-1"}),
			want:   []string{"aws:///eu-west-1a/i-2", "aws:///eu-west-1b/i-1"},
		},
		"ReportedEmpty": {
			reason: "a pool that runs no machine yet reports an empty list, which is not a missing one",
			xr:     poolXR(replicas(3), []any{}),
			want:   []string{},
		},
		"NotReported": {
			reason: "a pool asked for machines that reports no list has not reported them yet",
			xr:     poolXR(replicas(3), nil),
			errs:   []string{"status.outputs.providerIDList: Required value"},
		},
		"NotReportedNoReplicas": {
			reason: "a pool that is asked for no machine runs none, reported or not",
			xr:     poolXR(replicas(0), nil),
			want:   []string{},
		},
		"NotReportedReplicasDecoded": {
			reason: "replicas decoded from JSON are a float, and still not zero",
			xr:     poolXR(map[string]any{"replicas": float64(3)}, nil),
			errs:   []string{"status.outputs.providerIDList: Required value"},
		},
		"NotReportedNoReplicasYet": {
			reason: "a pool whose replicas the bridge has not injected yet has reported nothing",
			xr:     poolXR(nil, nil),
			errs:   []string{"status.outputs.providerIDList: Required value"},
		},
		"NotAList": {
			reason: "a list is a list",
			xr:     poolXR(replicas(1), "aws:///a/i-1"),
			errs:   []string{`status.outputs.providerIDList: Invalid value: "aws:///a/i-1": must be a list of provider IDs`},
		},
		"BareInstanceID": {
			reason: "every entry is checked like a machine's provider ID, by index",
			xr:     poolXR(replicas(2), []any{"aws:///a/i-1", "i-2"}),
			errs:   []string{`status.outputs.providerIDList[1]: Invalid value: "i-2": must have the form <scheme>://<id>`},
		},
		"NotAString": {
			reason: "an entry that is not a string is named",
			xr:     poolXR(replicas(1), []any{int64(7)}),
			errs:   []string{"status.outputs.providerIDList[0]: Invalid value: 7: must be a string"},
		},
		"Repeated": {
			reason: "one machine counted twice would make CAPI count a replica that does not exist",
			xr:     poolXR(replicas(2), []any{"aws:///a/i-1", "aws:///a/i-1"}),
			errs:   []string{`status.outputs.providerIDList[1]: Duplicate value: "aws:///a/i-1, also at index 0"`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, errs := MapMachinePool(tc.xr)
			if diff := cmp.Diff(tc.want, got.ProviderIDList); diff != "" {
				t.Errorf("%s\nMapMachinePool(...) providerIDList: -want, +got:\n%s", tc.reason, diff)
			}
			if got.Replicas() != int64(len(tc.want)) {
				t.Errorf("%s\nMapMachinePool(...) replicas: want %d, got %d", tc.reason, len(tc.want), got.Replicas())
			}
			if len(errs) != len(tc.errs) {
				t.Fatalf("%s\nMapMachinePool(...) errors: want %q, got %v", tc.reason, tc.errs, errs)
			}
			for i := range errs {
				if !strings.Contains(errs[i].Error(), tc.errs[i]) {
					t.Errorf("%s\nMapMachinePool(...) error %d: want it to contain %q, got %q", tc.reason, i, tc.errs[i], errs[i].Error())
				}
			}
			if wantMissing := len(tc.errs) > 0 && strings.Contains(tc.errs[0], "Required"); Missing(errs) != wantMissing {
				t.Errorf("%s\nMissing(...): want %t", tc.reason, wantMissing)
			}
		})
	}
}
