package xr

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capxp/cluster-api-provider-crossplane/bridge/readiness"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/apply"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMemorySkipsOnlyTheSameVerdictOverTheSameObject(t *testing.T) {
	ready := metav1.Condition{Type: "CrossplaneInfrastructureReady", Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: 2}
	owner := func(rv string) *metav1.ObjectMeta { return &metav1.ObjectMeta{UID: "u1", ResourceVersion: rv} }
	cases := map[string]struct {
		recorded  bool
		made      string
		cachedRV  string
		condition metav1.Condition
		want      bool
	}{
		"NothingWritten":         {cachedRV: "10", condition: ready, want: false},
		"CacheBehindOurWrite":    {recorded: true, made: "12", cachedRV: "10", condition: ready, want: true},
		"CacheShowsAWriteBefore": {recorded: true, made: "12", cachedRV: "11", condition: ready, want: true},
		"CacheCaughtUp":          {recorded: true, made: "12", cachedRV: "12", condition: ready, want: false},
		"CacheShowsALaterWrite":  {recorded: true, made: "12", cachedRV: "100", condition: ready, want: false},
		"UncomparableVersions":   {recorded: true, made: "x12", cachedRV: "11", condition: ready, want: false},
		"UncomparableButSame":    {recorded: true, made: "x12", cachedRV: "10", condition: ready, want: true},
		"AnotherVerdict":         {recorded: true, made: "12", cachedRV: "10", condition: metav1.Condition{Type: ready.Type, Status: metav1.ConditionFalse, Reason: "Deleting"}, want: false},
		"AnotherOwnerGeneration": {recorded: true, made: "12", cachedRV: "10", condition: func() metav1.Condition { c := ready; c.ObservedGeneration = 3; return c }(), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := &memory{}
			if tc.recorded {
				w.Record(owner("10"), tc.made, partVerdict, verdictValue(ready))
			}
			if got := w.Already(owner(tc.cachedRV), partVerdict, verdictValue(tc.condition)); got != tc.want {
				t.Errorf("already() = %v, want %v", got, tc.want)
			}
		})
	}
	w := &memory{}
	w.Record(owner("10"), "12", partVerdict, verdictValue(ready))
	if w.Already(owner("10"), partProvisioned, verdictValue(ready)) {
		t.Error("already() for another part = true, want false")
	}
	w.Record(owner("10"), "13", apply.PartPatch, `{"spec":{"providerID":"p"}}`)
	if !w.Already(owner("10"), apply.PartPatch, `{"spec":{"providerID":"p"}}`) || w.Already(owner("10"), apply.PartPatch, `{"spec":{"providerID":"q"}}`) {
		t.Error("already() tells patches apart wrongly")
	}
	w.forget("u1")
	if w.Already(owner("10"), partVerdict, verdictValue(ready)) || w.Already(owner("10"), apply.PartPatch, `{"spec":{"providerID":"p"}}`) {
		t.Error("already() after forget = true, want false")
	}
}

func TestMemoryForgetsAllOfAnObjectAndOnlyIt(t *testing.T) {
	xr := func(uid types.UID, gen int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "status": "True", "reason": "Available", "observedGeneration": gen, "lastTransitionTime": "2026-01-01T00:00:00Z"},
		}}}}
		u.SetUID(uid)
		return u
	}
	cases := map[string]struct {
		forget types.UID
		want   bool // whether u1 is still remembered
	}{
		"ForgetTheObject": {forget: "u1", want: false},
		"ForgetAnother":   {forget: "u2", want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := &memory{}
			m.Record(&metav1.ObjectMeta{UID: "u1", ResourceVersion: "10"}, "11", apply.PartPatch, "p")
			m.mirrored("u1", readiness.Mirror{From: 1, To: 2})
			m.read(xr("u1", 3))
			m.release("u1", "c/selector")
			m.Record(&metav1.ObjectMeta{UID: "u2", ResourceVersion: "10"}, "11", apply.PartPatch, "p")

			m.forget(tc.forget)

			got := map[string]bool{
				"written":  m.echo("u1", "10", "11"),
				"mirror":   m.mirror("u1") != readiness.Mirror{},
				"released": m.release("u1", "c/selector"),
				// An older Ready is replaced by the remembered one.
				"conditions": m.read(xr("u1", 1)).ready.ObservedGeneration == 3,
			}
			for what, remembered := range got {
				if remembered != tc.want {
					t.Errorf("%s remembered = %v, want %v", what, remembered, tc.want)
				}
			}
		})
	}
}
