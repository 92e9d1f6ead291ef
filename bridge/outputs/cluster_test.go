package outputs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

func xr(spec, status map[string]any) *unstructured.Unstructured {
	o := map[string]any{"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "CrossplaneCluster"}
	if spec != nil {
		o["spec"] = spec
	}
	if status != nil {
		o["status"] = status
	}
	return &unstructured.Unstructured{Object: o}
}

func ep(host any, port any) map[string]any { return map[string]any{"host": host, "port": port} }

func outputs(e map[string]any) map[string]any {
	return map[string]any{"outputs": map[string]any{"controlPlaneEndpoint": e}}
}

func TestMapCluster(t *testing.T) {
	type want struct {
		endpoint infrav1.APIEndpoint
		errs     []string
	}
	cases := map[string]struct {
		reason string
		xr     *unstructured.Unstructured
		want   want
	}{
		"EndpointFromOutputs": {
			reason: "a valid output endpoint maps to spec.controlPlaneEndpoint",
			xr:     xr(nil, outputs(ep("lb-123.elb.amazonaws.com", int64(6443)))),
			want:   want{endpoint: infrav1.APIEndpoint{Host: "lb-123.elb.amazonaws.com", Port: 6443}},
		},
		"EndpointPortAsFloat": {
			reason: "JSON numbers may arrive as floats; whole ones are fine",
			xr:     xr(nil, outputs(ep("10.0.0.1", float64(443)))),
			want:   want{endpoint: infrav1.APIEndpoint{Host: "10.0.0.1", Port: 443}},
		},
		"EndpointFromUserSpec": {
			reason: "externally provisioned infrastructure: the user set the endpoint and no output is needed",
			xr:     xr(map[string]any{"controlPlaneEndpoint": ep("api.example.org", int64(6443))}, nil),
			want:   want{endpoint: infrav1.APIEndpoint{Host: "api.example.org", Port: 6443}},
		},
		"EndpointSameInSpecAndOutputs": {
			reason: "once mapped, the same output keeps mapping",
			xr:     xr(map[string]any{"controlPlaneEndpoint": ep("api.example.org", int64(6443))}, outputs(ep("api.example.org", int64(6443)))),
			want:   want{endpoint: infrav1.APIEndpoint{Host: "api.example.org", Port: 6443}},
		},
		"EndpointMissing": {
			reason: "no endpoint anywhere is a missing output, never a default",
			xr:     xr(nil, map[string]any{}),
			want:   want{errs: []string{"status.outputs.controlPlaneEndpoint: Required value: the composition has not reported the control plane endpoint"}},
		},
		"EndpointEmptyHost": {
			reason: "an empty host is named",
			xr:     xr(nil, outputs(ep("", int64(6443)))),
			want:   want{errs: []string{"status.outputs.controlPlaneEndpoint.host: Required value: must not be empty"}},
		},
		"EndpointPortZero": {
			reason: "port 0 is named with its value",
			xr:     xr(nil, outputs(ep("api.example.org", int64(0)))),
			want:   want{errs: []string{"status.outputs.controlPlaneEndpoint.port: Invalid value: 0: must be between 1 and 65535"}},
		},
		"EndpointPortTooHigh": {
			reason: "ports above 65535 are named with their value",
			xr:     xr(nil, outputs(ep("api.example.org", int64(70000)))),
			want:   want{errs: []string{"status.outputs.controlPlaneEndpoint.port: Invalid value: 70000: must be between 1 and 65535"}},
		},
		"EndpointPortNotANumber": {
			reason: "a port must be a number",
			xr:     xr(nil, outputs(ep("api.example.org", "6443"))),
			want:   want{errs: []string{`status.outputs.controlPlaneEndpoint.port: Invalid value: "6443": must be a number`}},
		},
		"EndpointPortMissing": {
			reason: "a host without a port is incomplete",
			xr:     xr(nil, outputs(map[string]any{"host": "api.example.org"})),
			want:   want{errs: []string{"status.outputs.controlPlaneEndpoint.port: Invalid value: null: must be set"}},
		},
		"EndpointHostMalformed": {
			reason: "a host must be an IP address or a DNS name",
			xr:     xr(nil, outputs(ep("https://api.example.org", int64(443)))),
			want:   want{errs: []string{`status.outputs.controlPlaneEndpoint.host: Invalid value: "https://api.example.org": a lowercase RFC 1123 subdomain`}},
		},
		"EndpointChanged": {
			reason: "spec.controlPlaneEndpoint is immutable, so a different output is an error, not a move",
			xr:     xr(map[string]any{"controlPlaneEndpoint": ep("old.example.org", int64(6443))}, outputs(ep("new.example.org", int64(6443)))),
			want:   want{errs: []string{`status.outputs.controlPlaneEndpoint: Invalid value: "new.example.org:6443": differs from spec.controlPlaneEndpoint "old.example.org:6443", which is immutable once set`}},
		},
		"FailureDomainsValid": {
			reason: "named, unique failure domains are fine",
			xr: xr(nil, map[string]any{
				"outputs":        map[string]any{"controlPlaneEndpoint": ep("10.0.0.1", int64(6443))},
				"failureDomains": []any{map[string]any{"name": "a", "controlPlane": true}, map[string]any{"name": "b"}},
			}),
			want: want{endpoint: infrav1.APIEndpoint{Host: "10.0.0.1", Port: 6443}},
		},
		"FailureDomainsDuplicated": {
			reason: "duplicate failure domain names are named",
			xr: xr(nil, map[string]any{
				"outputs":        map[string]any{"controlPlaneEndpoint": ep("10.0.0.1", int64(6443))},
				"failureDomains": []any{map[string]any{"name": "a"}, map[string]any{"name": "a"}, map[string]any{"controlPlane": "yes"}},
			}),
			want: want{
				endpoint: infrav1.APIEndpoint{Host: "10.0.0.1", Port: 6443},
				errs: []string{
					`status.failureDomains[1].name: Duplicate value: "a"`,
					"status.failureDomains[2].name: Required value: must not be empty",
					`status.failureDomains[2].controlPlane: Invalid value: "yes": must be a boolean`,
				},
			},
		},
		"FailureDomainsV1Beta1Map": {
			reason: "the v1beta1 map shape is not the v1beta2 contract",
			xr: xr(nil, map[string]any{
				"outputs":        map[string]any{"controlPlaneEndpoint": ep("10.0.0.1", int64(6443))},
				"failureDomains": map[string]any{"a": map[string]any{}},
			}),
			want: want{
				endpoint: infrav1.APIEndpoint{Host: "10.0.0.1", Port: 6443},
				errs:     []string{`status.failureDomains: Invalid value: {"a":{}}: must be a list of failure domains (CAPI v1beta2 shape)`},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, errs := MapCluster(tc.xr)
			if diff := cmp.Diff(tc.want.endpoint, got.Endpoint); diff != "" {
				t.Errorf("%s\nMapCluster(...) endpoint: -want, +got:\n%s", tc.reason, diff)
			}
			msgs := make([]string, 0, len(errs))
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			if len(msgs) != len(tc.want.errs) {
				t.Fatalf("%s\nMapCluster(...) errors: want %q, got %q", tc.reason, tc.want.errs, msgs)
			}
			for i := range msgs {
				if !contains(msgs[i], tc.want.errs[i]) {
					t.Errorf("%s\nMapCluster(...) error %d: want it to contain %q, got %q", tc.reason, i, tc.want.errs[i], msgs[i])
				}
			}
		})
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestEndpointNotRequired(t *testing.T) {
	cases := map[string]struct {
		reason string
		xr     *unstructured.Unstructured
		want   []string
	}{
		"NoEndpoint": {
			reason: "under a managed control plane, an endpoint not reported is no error",
			xr:     xr(nil, map[string]any{"outputs": map[string]any{}}),
		},
		"InvalidEndpoint": {
			reason: "an endpoint reported must still be valid",
			xr:     xr(nil, map[string]any{"outputs": map[string]any{"controlPlaneEndpoint": ep("", int64(443))}}),
			want:   []string{"status.outputs.controlPlaneEndpoint.host: Required value: must not be empty"},
		},
		"OtherErrors": {
			reason: "only the missing endpoint is forgiven",
			xr:     xr(nil, map[string]any{"failureDomains": "zone-a", "outputs": map[string]any{}}),
			want:   []string{"status.failureDomains: Invalid value"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := MapCluster(tc.xr)
			got := EndpointNotRequired(errs)
			if len(got) != len(tc.want) {
				t.Fatalf("%s\nEndpointNotRequired(...): %v, want %d errors %v", tc.reason, got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i].Error(), w) {
					t.Errorf("%s\nEndpointNotRequired(...)[%d]: %v, want %q", tc.reason, i, got[i], w)
				}
			}
		})
	}
}
