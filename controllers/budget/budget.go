// Package budget rations the manager's reads of credentials Secrets by the
// namespace they are read for: each namespace has a budget of its own under
// the manager-wide one, so a namespace naming many missing or changing
// Secrets waits on its own budget while every other namespace's reads go
// through.
package budget

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Each namespace's reads of credentials Secrets have a budget of their own,
// under the manager-wide one (secretReadQPS): a namespace naming many
// missing or changing Secrets spends its own budget and waits, while every
// other namespace's reads go through.
const (
	// QPS and Burst are a namespace's budget.
	QPS   = 2
	Burst = 10
	// budgetIdle is how long a namespace's budget is kept unused before it
	// is forgotten (it is full again by then).
	budgetIdle = time.Minute
)

// Exceeded is returned, without reading, when a namespace has spent
// its budget: its XR is checked again after RetryAfter, and the worker is
// free for other namespaces' meanwhile.
type Exceeded struct {
	Namespace  string
	RetryAfter time.Duration
}

func (e *Exceeded) Error() string {
	return fmt.Sprintf("namespace %s has spent its budget of credentials Secret reads (%d/s); checking again in %s", e.Namespace, QPS, e.RetryAfter.Round(time.Millisecond))
}

// Budgets are the namespaces' budgets.
type Budgets struct {
	qps   rate.Limit
	burst int
	now   func() time.Time

	mu       sync.Mutex
	budgets  map[string]*budget
	lastSwep time.Time
}

type budget struct {
	*rate.Limiter
	used time.Time
}

// NewBudgets returns every namespace's budget, full.
func NewBudgets() *Budgets {
	return &Budgets{qps: QPS, burst: Burst, now: time.Now, budgets: map[string]*budget{}}
}

// of returns the namespace's budget, forgetting those idle for long.
func (b *Budgets) of(ns string) *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if now.Sub(b.lastSwep) > budgetIdle {
		for k, v := range b.budgets {
			if now.Sub(v.used) > budgetIdle {
				delete(b.budgets, k)
			}
		}
		b.lastSwep = now
	}
	bu, ok := b.budgets[ns]
	if !ok {
		bu = &budget{Limiter: rate.NewLimiter(b.qps, b.burst)}
		b.budgets[ns] = bu
	}
	bu.used = now
	return bu.Limiter
}

// spend takes one read from the namespace's budget; when it is spent, it
// says how long until the next read without taking it.
func (b *Budgets) spend(ns string) (time.Duration, bool) {
	l := b.of(ns)
	r := l.ReserveN(b.now(), 1)
	if d := r.DelayFrom(b.now()); d > 0 {
		r.CancelAt(b.now())
		return d, false
	}
	return 0, true
}

// FailFast reads Secrets on the namespaces' budgets, refusing a read with a
// Exceeded when the namespace's is spent: an XR's credentials are
// checked again later; a namespace's record keeps its verdicts on the
// configs not read, and reads them in turn.
type FailFast struct {
	client.Reader
	Budgets *Budgets
}

// Get reads a Secret on the budget of the namespace it is read for.
func (f FailFast) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	ns := readFor(ctx, key.Namespace)
	if d, ok := f.Budgets.spend(ns); !ok {
		return &Exceeded{Namespace: ns, RetryAfter: d}
	}
	return f.Reader.Get(ctx, key, obj, opts...)
}

type readForKey struct{}

// WithReadFor charges the Secret reads made with ctx to namespace ns's
// budget: the namespace whose XR or record needs them, not the one holding
// the Secret (a shared config's, in the platform's namespace, is read for
// every tenant).
func WithReadFor(ctx context.Context, ns string) context.Context {
	return context.WithValue(ctx, readForKey{}, ns)
}

// readFor is the namespace reads made with ctx are charged to; the
// Secret's own by default.
func readFor(ctx context.Context, secretNamespace string) string {
	if ns, ok := ctx.Value(readForKey{}).(string); ok && ns != "" {
		return ns
	}
	return secretNamespace
}

// Spent reports whether err is only that the namespace spent its budget of
// Secret reads, and when to try again.
func Spent(err error) (time.Duration, bool) {
	var agg kerrors.Aggregate
	if errors.As(err, &agg) {
		var after time.Duration
		for _, e := range agg.Errors() {
			d, ok := Spent(e)
			if !ok {
				return 0, false
			}
			after = max(after, d)
		}
		return after, len(agg.Errors()) > 0
	}
	var be *Exceeded
	if errors.As(err, &be) {
		return be.RetryAfter, true
	}
	return 0, false
}
