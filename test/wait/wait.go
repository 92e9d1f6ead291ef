// Package wait is how the plane suites (e2e, chaos, install) wait for what
// they check: a condition polled until it holds or its time is up, and a
// condition that must hold for a while.
package wait

import (
	"testing"
	"time"
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

func (o Options) logs() string {
	if o.Logs == nil {
		return ""
	}
	return " (logs in " + o.Logs() + ")"
}

// Eventually polls f until it returns nil and says how long that took; it
// fails t with f's last error once within has passed.
func (o Options) Eventually(t testing.TB, what string, within time.Duration, f func() error) {
	t.Helper()
	start := time.Now()
	for {
		err := f()
		if err == nil {
			if !o.Quiet {
				t.Logf("%s: after %s", what, time.Since(start).Round(100*time.Millisecond))
			}
			return
		}
		if time.Since(start) > within {
			t.Fatalf("%s: not within %s: %v%s", what, within, err, o.logs())
		}
		time.Sleep(o.every())
	}
}

// Consistently polls f for d and fails t the first time it returns an
// error.
func (o Options) Consistently(t testing.TB, what string, d time.Duration, f func() error) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(o.every()) {
		if err := f(); err != nil {
			t.Fatalf("%s: %v%s", what, err, o.logs())
		}
	}
}
