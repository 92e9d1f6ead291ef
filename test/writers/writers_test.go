package writers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func entry(manager, subresource string, op metav1.ManagedFieldsOperationType, at time.Time, fields string) metav1.ManagedFieldsEntry {
	t := metav1.NewTime(at)
	return metav1.ManagedFieldsEntry{Manager: manager, Subresource: subresource, Operation: op, Time: &t,
		FieldsV1: metav1.NewFieldsV1(fields)}
}

func TestOf(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Second)
	crossplane := entry("crossplane", "status", metav1.ManagedFieldsOperationUpdate, t0, `{"f:status":{}}`)
	bridge := entry("capxp-bridge", "", metav1.ManagedFieldsOperationUpdate, t0, `{"f:metadata":{}}`)
	cases := map[string]struct {
		before, after []metav1.ManagedFieldsEntry
		want          string
	}{
		"ANewManager": {
			before: []metav1.ManagedFieldsEntry{crossplane},
			after:  []metav1.ManagedFieldsEntry{crossplane, bridge},
			want:   "capxp-bridge",
		},
		"ALaterTime": {
			before: []metav1.ManagedFieldsEntry{crossplane, bridge},
			after:  []metav1.ManagedFieldsEntry{entry("crossplane", "status", metav1.ManagedFieldsOperationUpdate, t1, `{"f:status":{}}`), bridge},
			want:   "crossplane status",
		},
		"OtherFieldsInTheSameSecond": {
			before: []metav1.ManagedFieldsEntry{crossplane, bridge},
			after:  []metav1.ManagedFieldsEntry{crossplane, entry("capxp-bridge", "", metav1.ManagedFieldsOperationUpdate, t0, `{"f:spec":{}}`)},
			want:   "capxp-bridge",
		},
		"TwoManagersAtOnce": {
			before: []metav1.ManagedFieldsEntry{crossplane},
			after: []metav1.ManagedFieldsEntry{
				entry("crossplane", "status", metav1.ManagedFieldsOperationUpdate, t1, `{"f:status":{}}`),
				entry("apiextensions.crossplane.io/composite", "status", metav1.ManagedFieldsOperationApply, t1, `{"f:status":{}}`),
			},
			want: "apiextensions.crossplane.io/composite status + crossplane status",
		},
		"AnApplyBesideAnUpdateOfTheSameManager": {
			before: []metav1.ManagedFieldsEntry{bridge},
			after:  []metav1.ManagedFieldsEntry{bridge, entry("capxp-bridge", "status", metav1.ManagedFieldsOperationApply, t0, `{"f:status":{}}`)},
			want:   "capxp-bridge status",
		},
		"NothingChanged": {
			before: []metav1.ManagedFieldsEntry{crossplane, bridge},
			after:  []metav1.ManagedFieldsEntry{crossplane, bridge},
			want:   Unattributed,
		},
		"AnEntryWithoutFields": {
			before: []metav1.ManagedFieldsEntry{{Manager: "capxp-bridge", Operation: metav1.ManagedFieldsOperationUpdate}},
			after:  []metav1.ManagedFieldsEntry{bridge},
			want:   "capxp-bridge",
		},
		"AnEntryDropped": {
			before: []metav1.ManagedFieldsEntry{crossplane, bridge},
			after:  []metav1.ManagedFieldsEntry{crossplane},
			want:   Unattributed,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Of(tc.before, tc.after); got != tc.want {
				t.Errorf("Of() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLog(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	crossplane := entry("crossplane", "status", metav1.ManagedFieldsOperationUpdate, t0, `{"f:status":{}}`)
	later := func(e metav1.ManagedFieldsEntry, d time.Duration) metav1.ManagedFieldsEntry {
		at := metav1.NewTime(e.Time.Add(d))
		e.Time = &at
		return e
	}
	bridge := entry("capxp-bridge", "status", metav1.ManagedFieldsOperationApply, t0, `{"f:status":{}}`)
	l := &Log{}
	const uid, other = types.UID("a"), types.UID("b")
	// Seen before the window: not counted.
	l.Record(uid, t0.Add(-3*time.Minute), nil, []metav1.ManagedFieldsEntry{crossplane})
	for i := range 6 {
		l.Record(uid, t0.Add(time.Duration(i)*time.Second), []metav1.ManagedFieldsEntry{later(crossplane, time.Duration(i)*time.Second)},
			[]metav1.ManagedFieldsEntry{later(crossplane, time.Duration(i+1)*time.Second)})
	}
	l.Record(uid, t0.Add(10*time.Second), nil, []metav1.ManagedFieldsEntry{crossplane, bridge})
	l.Record(uid, t0.Add(11*time.Second), []metav1.ManagedFieldsEntry{bridge}, []metav1.ManagedFieldsEntry{bridge})
	// Seen after the window's end: not counted.
	l.Record(uid, t0.Add(time.Minute), []metav1.ManagedFieldsEntry{}, []metav1.ManagedFieldsEntry{bridge})
	l.Record(other, t0, nil, []metav1.ManagedFieldsEntry{bridge})

	c := l.Before(uid, t0.Add(30*time.Second), 2*time.Minute)
	if c.Total != 8 {
		t.Errorf("Total = %d, want 8", c.Total)
	}
	for m, want := range map[string]int{"crossplane": 7, "capxp-bridge": 1, Unattributed: 1, "apiextensions.crossplane.io/composite": 0} {
		if got := c.Of(m); got != want {
			t.Errorf("Of(%q) = %d, want %d", m, got, want)
		}
	}
	want := "8 updates in the 2m0s before: 6 by crossplane status, 1 by capxp-bridge status + crossplane status, 1 by unattributed"
	if got := c.String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
}
