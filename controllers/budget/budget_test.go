package budget

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// countingReader counts the reads that reach the API server.
type countingReader struct {
	client.Reader
	gets map[string]int
}

func (c *countingReader) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	c.gets[key.Namespace]++
	return nil
}

func TestSecretBudgets(t *testing.T) {
	cases := map[string]struct {
		reason  string
		reads   []secretRead
		reached map[string]int
		refused map[string]int
	}{
		"BurstThenRate": {
			reason:  "a namespace reads its burst at once, then at its rate; the rest are refused, not waited for",
			reads:   append(repeat("flood", 0, Burst+5), repeat("flood", time.Second, QPS+1)...),
			reached: map[string]int{"flood": Burst + QPS},
			refused: map[string]int{"flood": 5 + 1},
		},
		"OthersUnaffected": {
			reason:  "a namespace that spent its budget does not spend another's",
			reads:   append(repeat("flood", 0, 100), repeat("quiet", 0, 3)...),
			reached: map[string]int{"flood": Burst, "quiet": 3},
			refused: map[string]int{"flood": 100 - Burst},
		},
		"Refilled": {
			reason:  "a namespace idle for longer than its budget takes to refill reads its burst again",
			reads:   append(repeat("a", 0, Burst), repeat("a", 2*budgetIdle, Burst)...),
			reached: map[string]int{"a": 2 * Burst},
			refused: map[string]int{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			start := time.Unix(1_800_000_000, 0)
			now := start
			b := NewBudgets()
			b.now = func() time.Time { return now }
			c := &countingReader{gets: map[string]int{}}
			r := FailFast{Reader: c, Budgets: b}
			refused := map[string]int{}
			for _, rd := range tc.reads {
				now = start.Add(rd.after)
				err := r.Get(t.Context(), client.ObjectKey{Namespace: rd.ns, Name: "s"}, &corev1.Secret{})
				var be *Exceeded
				switch {
				case errors.As(err, &be):
					if be.RetryAfter <= 0 || be.RetryAfter > time.Second/QPS {
						t.Errorf("%s\nrefused read of %s: retry after %s, want within one read's time", tc.reason, rd.ns, be.RetryAfter)
					}
					refused[rd.ns]++
				case err != nil:
					t.Fatalf("Get: %v", err)
				}
			}
			if !equalCounts(c.gets, tc.reached) || !equalCounts(refused, tc.refused) {
				t.Errorf("%s\nreads reaching the API server %v, want %v; refused %v, want %v", tc.reason, c.gets, tc.reached, refused, tc.refused)
			}
		})
	}
}

// secretRead is a read of a Secret of namespace ns, after the test's start.
type secretRead struct {
	ns    string
	after time.Duration
}

func repeat(ns string, after time.Duration, n int) []secretRead {
	out := make([]secretRead, n)
	for i := range out {
		out[i] = secretRead{ns, after}
	}
	return out
}

func equalCounts(a, b map[string]int) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

func TestSpent(t *testing.T) {
	be := &Exceeded{Namespace: "team-a", RetryAfter: 300 * time.Millisecond}
	cases := map[string]struct {
		reason string
		err    error
		after  time.Duration
		ok     bool
	}{
		"None":       {reason: "no error spent nothing", err: nil},
		"Spent":      {reason: "the budget's own error", err: be, after: be.RetryAfter, ok: true},
		"Wrapped":    {reason: "wrapped by the credentials check", err: fmt.Errorf("cannot resolve credentials: %w", be), after: be.RetryAfter, ok: true},
		"Aggregated": {reason: "the reconcile aggregates its error with the write's", err: kerrors.NewAggregate([]error{fmt.Errorf("x: %w", be)}), after: be.RetryAfter, ok: true},
		"Other":      {reason: "another error beside it is an error", err: kerrors.NewAggregate([]error{be, errors.New("boom")})},
		"Unrelated":  {reason: "an unrelated error is an error", err: errors.New("boom")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			after, ok := Spent(tc.err)
			if after != tc.after || ok != tc.ok {
				t.Errorf("%s\nSpent(%v) = %s, %t; want %s, %t", tc.reason, tc.err, after, ok, tc.after, tc.ok)
			}
		})
	}
}

// A shared config's Secret lives in the platform's namespace: reading it for
// a tenant's XR spends that tenant's budget, not every tenant's.
func TestSecretReadsAreChargedToTheReader(t *testing.T) {
	b := NewBudgets()
	now := time.Unix(1_800_000_000, 0)
	b.now = func() time.Time { return now }
	r := FailFast{Reader: &countingReader{gets: map[string]int{}}, Budgets: b}
	shared := client.ObjectKey{Namespace: "platform", Name: "shared"}
	for range Burst {
		if err := r.Get(WithReadFor(t.Context(), "flood"), shared, &corev1.Secret{}); err != nil {
			t.Fatalf("within its burst: %v", err)
		}
	}
	var be *Exceeded
	if err := r.Get(WithReadFor(t.Context(), "flood"), shared, &corev1.Secret{}); !errors.As(err, &be) || be.Namespace != "flood" {
		t.Errorf("past its burst, the flooding namespace's read: got %v, want its budget spent", err)
	}
	if err := r.Get(WithReadFor(t.Context(), "quiet"), shared, &corev1.Secret{}); err != nil {
		t.Errorf("another namespace's read of the same shared Secret: %v, want it read", err)
	}
}
