package policies

import (
	"slices"
	"testing"

	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
)

// TestUnknownFamiliesExcludes checks which API groups the unknown-families
// policy's rules exclude, where no CEL runs: never a group an enforced
// provider's managed resources may be in, unless the credentials policy
// enforces it already.
func TestUnknownFamiliesExcludes(t *testing.T) {
	aws := credentials.Provider{ConfigGroup: "aws.m.upbound.io", ManagedGroup: "aws.m.upbound.io"}
	cases := map[string]struct {
		reason    string
		providers []credentials.Provider
		known     []string
		excluded  []string
		matched   []string
	}{
		"PlatformGroups": {
			reason:    "CAPI's and Crossplane's groups are excluded, an enforced provider's groups are not",
			providers: []credentials.Provider{aws},
			excluded:  []string{"", "coordination.k8s.io", "cluster.x-k8s.io", "infrastructure.cluster.x-k8s.io", "apiextensions.crossplane.io"},
			matched:   []string{"aws.m.upbound.io", "ec2.aws.m.upbound.io", "bootstrap.test.example.org"},
		},
		"KnownGroups": {
			reason:    "a group the credentials policy enforces is excluded",
			providers: []credentials.Provider{aws},
			known:     []string{"ec2.aws.m.upbound.io"},
			excluded:  []string{"ec2.aws.m.upbound.io"},
			matched:   []string{"aws.m.upbound.io", "s3.aws.m.upbound.io"},
		},
		"ProviderCoversAPlatformGroup": {
			reason:    "a platform group an enforced provider's suffix covers is not excluded",
			providers: []credentials.Provider{{ConfigGroup: "crossplane.io", ManagedGroup: "crossplane.io"}},
			excluded:  []string{"cluster.x-k8s.io"},
			matched:   []string{"apiextensions.crossplane.io", "pkg.crossplane.io"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, _ := UnknownFamilies(tc.providers, tc.known)
			var got []string
			for _, r := range p.Spec.MatchConstraints.ExcludeResourceRules {
				got = append(got, r.APIGroups...)
			}
			for _, g := range tc.excluded {
				if !slices.Contains(got, g) {
					t.Errorf("%s: %q is not excluded; excluded: %v", tc.reason, g, got)
				}
			}
			for _, g := range tc.matched {
				if slices.Contains(got, g) {
					t.Errorf("%s: %q is excluded, so the policy never sees it", tc.reason, g)
				}
			}
		})
	}
}
