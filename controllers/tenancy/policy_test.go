package tenancy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestKnownGroups(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		reason string
		groups []string
		listed map[string]bool
		since  map[string]time.Time
		want   []string
		// wantSince are the times recorded; wait how long until the next.
		wantSince map[string]time.Time
		wait      time.Duration
	}{
		"New": {
			reason:    "a group the credentials policy does not list yet stays refused, listed from now",
			groups:    []string{"ec2.aws.m.upbound.io"},
			wantSince: map[string]time.Time{"ec2.aws.m.upbound.io": now},
			wait:      policySettles,
		},
		"JustListed": {
			reason:    "a group listed a moment ago (another CRD of its family woke the controller) waits out the rest",
			groups:    []string{"ec2.aws.m.upbound.io"},
			listed:    map[string]bool{"ec2.aws.m.upbound.io": true},
			since:     map[string]time.Time{"ec2.aws.m.upbound.io": now.Add(-500 * time.Millisecond)},
			wantSince: map[string]time.Time{"ec2.aws.m.upbound.io": now.Add(-500 * time.Millisecond)},
			wait:      policySettles - 500*time.Millisecond,
		},
		"Settled": {
			reason:    "a group listed for a while is enforced by the credentials policy, and let go",
			groups:    []string{"ec2.aws.m.upbound.io", "iam.aws.m.upbound.io"},
			listed:    map[string]bool{"ec2.aws.m.upbound.io": true, "iam.aws.m.upbound.io": true},
			since:     map[string]time.Time{"ec2.aws.m.upbound.io": now.Add(-time.Hour), "iam.aws.m.upbound.io": now.Add(-time.Minute)},
			want:      []string{"ec2.aws.m.upbound.io", "iam.aws.m.upbound.io"},
			wantSince: map[string]time.Time{"ec2.aws.m.upbound.io": now.Add(-time.Hour), "iam.aws.m.upbound.io": now.Add(-time.Minute)},
		},
		"ListedByAnEarlierManager": {
			reason:    "a group listed without a record was listed by an earlier manager: a restart does not refuse it again",
			groups:    []string{"ec2.aws.m.upbound.io"},
			listed:    map[string]bool{"ec2.aws.m.upbound.io": true},
			want:      []string{"ec2.aws.m.upbound.io"},
			wantSince: map[string]time.Time{"ec2.aws.m.upbound.io": {}},
		},
		"RecordedButNotListed": {
			reason:    "a record of a group the policy no longer lists (removed, or written but not stored) starts again",
			groups:    []string{"ec2.aws.m.upbound.io"},
			since:     map[string]time.Time{"ec2.aws.m.upbound.io": now.Add(-time.Hour)},
			wantSince: map[string]time.Time{"ec2.aws.m.upbound.io": now},
			wait:      policySettles,
		},
		"Gone": {
			reason:    "a group whose CRDs went is forgotten",
			listed:    map[string]bool{"ec2.aws.m.upbound.io": true},
			since:     map[string]time.Time{"ec2.aws.m.upbound.io": now.Add(-time.Hour)},
			wantSince: map[string]time.Time{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			known, since, wait := knownGroups(tc.groups, tc.listed, tc.since, now)
			if diff := cmp.Diff(tc.want, known, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nknown: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantSince, since, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nsince: -want +got:\n%s", tc.reason, diff)
			}
			if wait != tc.wait {
				t.Errorf("%s\nwait: %s, want %s", tc.reason, wait, tc.wait)
			}
		})
	}
}
