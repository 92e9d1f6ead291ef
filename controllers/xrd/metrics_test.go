package xrd

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestStateSeries(t *testing.T) {
	steps := []struct {
		do     func()
		series int
		reason string
	}{
		{do: func() { setState("a.example.org", "WaitingForCRD") }, series: 1, reason: "a decided XRD has one series"},
		{do: func() { setState("b.example.org", "Adapted") }, series: 2, reason: "each XRD its own"},
		{do: func() { setState("a.example.org", "Adapted") }, series: 2, reason: "a new state replaces the XRD's series"},
		{do: func() { setState("a.example.org", "Adapted") }, series: 2, reason: "the same state again changes nothing"},
		{do: func() { forgetState("a.example.org") }, series: 1, reason: "a forgotten XRD has none"},
		{do: func() { forgetState("c.example.org") }, series: 1, reason: "forgetting an XRD never decided on is nothing"},
		{do: func() { forgetState("b.example.org") }, series: 0, reason: "none left"},
	}
	for i, s := range steps {
		s.do()
		if got := testutil.CollectAndCount(xrdStates); got != s.series {
			t.Fatalf("step %d: %s: %d series, want %d", i, s.reason, got, s.series)
		}
	}
}
