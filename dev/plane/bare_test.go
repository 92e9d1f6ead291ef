package plane

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCAPIMetadata(t *testing.T) {
	cases := map[string]struct {
		version string
		want    string
		wantErr bool
	}{
		"Release":     {version: "v1.14.2", want: "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\nreleaseSeries:\n- major: 1\n  minor: 14\n  contract: v1beta2\n"},
		"PreRelease":  {version: "v1.15.0-beta.1", want: "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\nreleaseSeries:\n- major: 1\n  minor: 15\n  contract: v1beta2\n"},
		"NotSemantic": {version: "main", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := capiMetadata(tc.version)
			if (err != nil) != tc.wantErr {
				t.Fatalf("capiMetadata(%q): error %v, want error %t", tc.version, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("capiMetadata(%q): -want +got:\n%s", tc.version, diff)
			}
		})
	}
}
