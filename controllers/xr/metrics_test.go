package xr

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func TestWaitingXRs(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	type set struct {
		uid   types.UID
		x     waitingXR
		waits bool
	}
	cases := map[string]struct {
		reason     string
		sets       []set
		forgetKind string
		want       string
	}{
		"None": {
			reason: "Nothing waits: no series.",
			want:   "",
		},
		"OldestPerNamespace": {
			reason: "XRs are counted by kind and namespace, each with the age of its oldest.",
			sets: []set{
				{"a", waitingXR{"CrossplaneMachine", "team-a", now.Add(-10 * time.Minute)}, true},
				{"b", waitingXR{"CrossplaneMachine", "team-a", now.Add(-time.Minute)}, true},
				{"c", waitingXR{"CrossplaneCluster", "team-b", now.Add(-30 * time.Second)}, true},
			},
			want: `
capxp_xr_waiting_oldest_seconds{kind="CrossplaneCluster",namespace="team-b"} 30
capxp_xr_waiting_oldest_seconds{kind="CrossplaneMachine",namespace="team-a"} 600
capxp_xrs_waiting{kind="CrossplaneCluster",namespace="team-b"} 1
capxp_xrs_waiting{kind="CrossplaneMachine",namespace="team-a"} 2
`,
		},
		"Provisioned": {
			reason: "An XR that no longer waits is no longer counted, and its namespace's oldest moves on.",
			sets: []set{
				{"a", waitingXR{"CrossplaneMachine", "team-a", now.Add(-10 * time.Minute)}, true},
				{"b", waitingXR{"CrossplaneMachine", "team-a", now.Add(-time.Minute)}, true},
				{"a", waitingXR{}, false},
			},
			want: `
capxp_xr_waiting_oldest_seconds{kind="CrossplaneMachine",namespace="team-a"} 60
capxp_xrs_waiting{kind="CrossplaneMachine",namespace="team-a"} 1
`,
		},
		"KindNoLongerAdapted": {
			reason: "The XRs of a kind the bridge stopped adapting are dropped.",
			sets: []set{
				{"a", waitingXR{"CrossplaneMachine", "team-a", now.Add(-time.Minute)}, true},
				{"c", waitingXR{"EKSCluster", "team-b", now.Add(-time.Minute)}, true},
			},
			forgetKind: "EKSCluster",
			want: `
capxp_xr_waiting_oldest_seconds{kind="CrossplaneMachine",namespace="team-a"} 60
capxp_xrs_waiting{kind="CrossplaneMachine",namespace="team-a"} 1
`,
		},
		"ClockBehind": {
			reason: "An XR created after the clock reads (skew) is 0 s old, never negative.",
			sets: []set{
				{"a", waitingXR{"CrossplaneMachine", "team-a", now.Add(time.Minute)}, true},
			},
			want: `
capxp_xr_waiting_oldest_seconds{kind="CrossplaneMachine",namespace="team-a"} 0
capxp_xrs_waiting{kind="CrossplaneMachine",namespace="team-a"} 1
`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWaitingXRs(func() time.Time { return now })
			for _, s := range tc.sets {
				w.set(s.uid, s.x, s.waits)
			}
			if tc.forgetKind != "" {
				w.forgetKind(tc.forgetKind)
			}
			want := tc.want
			if oldest, count, ok := strings.Cut(want, "capxp_xrs_waiting{"); ok {
				want = "# HELP capxp_xr_waiting_oldest_seconds Age of the oldest XR counted in capxp_xrs_waiting, by XR kind and namespace.\n# TYPE capxp_xr_waiting_oldest_seconds gauge" +
					oldest +
					"# HELP capxp_xrs_waiting XRs whose CAPI owner waits for them to be provisioned (neither paused, externally managed nor deleting), by XR kind and namespace.\n# TYPE capxp_xrs_waiting gauge\n" +
					"capxp_xrs_waiting{" + count
			}
			if err := testutil.CollectAndCompare(w, strings.NewReader(want)); err != nil {
				t.Errorf("%s\n%v", tc.reason, err)
			}
		})
	}
}

func TestObserveProvisioned(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		reason     string
		readySince time.Time
		want       uint64
	}{
		"Observed":    {reason: "Ready 2 s before the provisioned write is one observation.", readySince: now.Add(-2 * time.Second), want: 1},
		"NoReadyTime": {reason: "An XR provisioned without a Ready time (a restart's first write) is not observed.", want: 0},
		"ClockSkewed": {reason: "A Ready time after the write is not a latency.", readySince: now.Add(time.Second), want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kind := "Test" + name
			observeProvisioned(kind, tc.readySince, now)
			m := &dto.Metric{}
			if err := readyToProvisioned.WithLabelValues(kind).(prometheus.Metric).Write(m); err != nil {
				t.Fatal(err)
			}
			if got := m.GetHistogram().GetSampleCount(); got != tc.want {
				t.Errorf("%s: %d observations, want %d", tc.reason, got, tc.want)
			}
		})
	}
}

func TestWaits(t *testing.T) {
	xr := func(edit func(*unstructured.Unstructured)) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetName("m")
		if edit != nil {
			edit(u)
		}
		return u
	}
	labelled := func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{clusterv1.ClusterNameLabel: "demo"}) }
	owned := func(u *unstructured.Unstructured) {
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: "m", UID: "u"}})
	}
	cases := map[string]struct {
		reason              string
		xr                  *unstructured.Unstructured
		provisioned, paused bool
		want                bool
	}{
		"Owned":             {reason: "a Machine waits for its XR", xr: xr(owned), want: true},
		"ClonedNotOwnedYet": {reason: "what CAPI cloned from a template waits before CAPI sets itself owner", xr: xr(labelled), want: true},
		"OutsideAnyCluster": {reason: "a tenant's XR that no CAPI object owns or names waits for nobody, held or not", xr: xr(nil)},
		"OwnedByAnotherGroup": {reason: "an owner outside CAPI is not CAPI waiting", xr: xr(func(u *unstructured.Unstructured) {
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.org/v1", Kind: "Thing", Name: "t", UID: "u"}})
		})},
		"Provisioned":  {reason: "a provisioned XR is waited for no more", xr: xr(owned), provisioned: true},
		"PausedByCAPI": {reason: "CAPI paused it", xr: xr(owned), paused: true},
		"ExternallyManaged": {reason: "someone else provisions it", xr: xr(func(u *unstructured.Unstructured) {
			owned(u)
			u.SetAnnotations(map[string]string{clusterv1.ManagedByAnnotation: "someone"})
		})},
		"Deleting": {reason: "a deleting XR is waited for no more", xr: xr(func(u *unstructured.Unstructured) {
			owned(u)
			u.SetDeletionTimestamp(&metav1.Time{Time: time.Unix(1, 0)})
		})},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := waits(tc.xr, tc.provisioned, tc.paused); got != tc.want {
				t.Errorf("%s: waits() = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}
