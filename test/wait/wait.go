// Package wait is how the plane suites (e2e, chaos, install) wait for what
// they check: gomega's Eventually and Consistently over a check that
// returns an error, with the suite's polling interval, a line saying how
// long a condition took, and where the suite's logs are when it fails.
package wait

import (
	"testing"
	"time"

	"github.com/onsi/gomega"
)

// Options say how a suite waits.
type Options struct {
	// Every is how often the condition is polled; 500 ms when zero.
	Every time.Duration
	// Logs, when set, says where the suite's logs are: a failure names it.
	Logs func() string
	// Quiet leaves out the line saying how long a condition took.
	Quiet bool
}

func (o Options) every() time.Duration {
	if o.Every == 0 {
		return 500 * time.Millisecond
	}
	return o.Every
}

// description is what a failure says: what was waited for, and where the
// logs are.
func (o Options) description(what string) string {
	if o.Logs == nil {
		return what
	}
	return what + " (logs in " + o.Logs() + ")"
}

// Eventually polls f until it returns nil and says how long that took; it
// fails t with f's last error once within has passed.
func (o Options) Eventually(t testing.TB, what string, within time.Duration, f func() error) {
	t.Helper()
	start := time.Now()
	gomega.NewWithT(t).Eventually(f).WithTimeout(within).WithPolling(o.every()).Should(gomega.Succeed(), o.description(what))
	if !o.Quiet {
		t.Logf("%s: after %s", what, time.Since(start).Round(100*time.Millisecond))
	}
}

// Consistently polls f for d and fails t the first time it returns an
// error.
func (o Options) Consistently(t testing.TB, what string, d time.Duration, f func() error) {
	t.Helper()
	gomega.NewWithT(t).Consistently(f).WithTimeout(d).WithPolling(o.every()).Should(gomega.Succeed(), o.description(what))
}
