package outputs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func machineXR(spec, status map[string]any) *unstructured.Unstructured {
	u := xr(spec, status)
	u.SetKind("CrossplaneMachine")
	return u
}

func TestMapMachine(t *testing.T) {
	pid := func(id string) map[string]any { return map[string]any{"outputs": map[string]any{"providerID": id}} }
	with := func(m map[string]any, k string, v any) map[string]any { m[k] = v; return m }
	cases := map[string]struct {
		reason string
		xr     *unstructured.Unstructured
		want   string
		errs   []string
	}{
		"ProviderIDFromOutputs": {
			reason: "a well-formed provider ID maps to spec.providerID",
			xr:     machineXR(nil, pid("aws:///eu-west-1a/i-0123")),
			want:   "aws:///eu-west-1a/i-0123",
		},
		"ProviderIDAlreadyInSpec": {
			reason: "once mapped, the same output keeps mapping",
			xr:     machineXR(map[string]any{"providerID": "kubernetes://local/m-1"}, pid("kubernetes://local/m-1")),
			want:   "kubernetes://local/m-1",
		},
		"ProviderIDMissing": {
			reason: "no provider ID is a missing output",
			xr:     machineXR(nil, map[string]any{}),
			errs:   []string{"status.outputs.providerID: Required value"},
		},
		"ProviderIDWithoutScheme": {
			reason: "a bare instance ID is not a provider ID",
			xr:     machineXR(nil, pid("i-0123")),
			errs:   []string{`status.outputs.providerID: Invalid value: "i-0123": must have the form <scheme>://<id>`},
		},
		"ProviderIDChanged": {
			reason: "spec.providerID is immutable",
			xr:     machineXR(map[string]any{"providerID": "aws:///a/i-1"}, pid("aws:///a/i-2")),
			errs:   []string{`status.outputs.providerID: Invalid value: "aws:///a/i-2": differs from spec.providerID "aws:///a/i-1"`},
		},
		"SpecProviderIDMalformed": {
			reason: "a provider ID someone wrote into the spec is checked like one the composition reported",
			xr:     machineXR(map[string]any{"providerID": "0"}, map[string]any{}),
			errs:   []string{`spec.providerID: Invalid value: "0": must have the form <scheme>://<id>`},
		},
		"AddressesValid": {
			reason: "CAPI's address types with valid values are fine",
			xr: machineXR(nil, with(pid("aws:///a/i-1"), "addresses", []any{
				map[string]any{"type": "InternalIP", "address": "10.0.1.5"},
				map[string]any{"type": "InternalDNS", "address": "ip-10-0-1-5.eu-west-1.compute.internal"},
			})),
			want: "aws:///a/i-1",
		},
		"AddressesInvalid": {
			reason: "bad addresses are named with their values",
			xr: machineXR(nil, with(pid("aws:///a/i-1"), "addresses", []any{
				map[string]any{"type": "PrivateIP", "address": "10.0.1.5"},
				map[string]any{"type": "InternalIP", "address": "10.0.1"},
				map[string]any{"type": "Hostname", "address": ""},
			})),
			want: "aws:///a/i-1",
			errs: []string{
				`status.addresses[0].type: Unsupported value: "PrivateIP"`,
				`status.addresses[1].address: Invalid value: "10.0.1": must be an IP address`,
				"status.addresses[2].address: Required value",
			},
		},
		"PlacedInAnotherFailureDomain": {
			reason: "a machine must land where CAPI placed it",
			xr:     machineXR(map[string]any{"failureDomain": "a"}, with(pid("aws:///b/i-1"), "failureDomain", "b")),
			want:   "aws:///b/i-1",
			errs:   []string{`status.failureDomain: Invalid value: "b": the machine was placed in "b" but spec.failureDomain is "a"`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, errs := MapMachine(tc.xr)
			if diff := cmp.Diff(tc.want, got.ProviderID); diff != "" {
				t.Errorf("%s\nMapMachine(...) providerID: -want, +got:\n%s", tc.reason, diff)
			}
			if len(errs) != len(tc.errs) {
				t.Fatalf("%s\nMapMachine(...) errors: want %q, got %v", tc.reason, tc.errs, errs)
			}
			for i := range errs {
				if !strings.Contains(errs[i].Error(), tc.errs[i]) {
					t.Errorf("%s\nMapMachine(...) error %d: want it to contain %q, got %q", tc.reason, i, tc.errs[i], errs[i].Error())
				}
			}
		})
	}
}
