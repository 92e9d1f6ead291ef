package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWrittenSkipsOnlyTheSameVerdictOverTheSameObject(t *testing.T) {
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
			w := &written{}
			if tc.recorded {
				w.record(owner("10"), tc.made, partVerdict, verdictValue(ready))
			}
			if got := w.already(owner(tc.cachedRV), partVerdict, verdictValue(tc.condition)); got != tc.want {
				t.Errorf("already() = %v, want %v", got, tc.want)
			}
		})
	}
	w := &written{}
	w.record(owner("10"), "12", partVerdict, verdictValue(ready))
	if w.already(owner("10"), partProvisioned, verdictValue(ready)) {
		t.Error("already() for another part = true, want false")
	}
	w.record(owner("10"), "13", partPatch, `{"spec":{"providerID":"p"}}`)
	if !w.already(owner("10"), partPatch, `{"spec":{"providerID":"p"}}`) || w.already(owner("10"), partPatch, `{"spec":{"providerID":"q"}}`) {
		t.Error("already() tells patches apart wrongly")
	}
	w.forget("u1")
	if w.already(owner("10"), partVerdict, verdictValue(ready)) || w.already(owner("10"), partPatch, `{"spec":{"providerID":"p"}}`) {
		t.Error("already() after forget = true, want false")
	}
}
