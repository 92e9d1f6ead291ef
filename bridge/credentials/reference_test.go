package credentials

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

func TestReferenceOf(t *testing.T) {
	cases := map[string]struct {
		reason string
		xr     map[string]any
		want   *infrav1.ProviderConfigReference
	}{
		"Unset": {
			reason: "an XR naming no credentials names none",
			xr:     map[string]any{"spec": map[string]any{}},
		},
		"NoSpec": {
			reason: "an XR without a spec names none",
			xr:     map[string]any{},
		},
		"NotAnObject": {
			reason: "a reference that is not an object names none",
			xr:     map[string]any{"spec": map[string]any{"providerConfigRef": "shared"}},
		},
		"NoName": {
			reason: "a reference without a name names none",
			xr:     map[string]any{"spec": map[string]any{"providerConfigRef": map[string]any{"kind": "ProviderConfig"}}},
		},
		"Full": {
			reason: "group, kind and name are read as written",
			xr: map[string]any{"spec": map[string]any{"providerConfigRef": map[string]any{
				"apiGroup": "aws.m.upbound.io", "kind": "ClusterProviderConfig", "name": "shared"}}},
			want: &infrav1.ProviderConfigReference{APIGroup: "aws.m.upbound.io", Kind: infrav1.ProviderConfigKindCluster, Name: "shared"},
		},
		"WrongTypes": {
			reason: "a field of another type reads as empty, not as a panic",
			xr: map[string]any{"spec": map[string]any{"providerConfigRef": map[string]any{
				"apiGroup": int64(1), "kind": true, "name": "shared"}}},
			want: &infrav1.ProviderConfigReference{Name: "shared"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ReferenceOf(tc.xr)); diff != "" {
				t.Errorf("%s\nReferenceOf(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
