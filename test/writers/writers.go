// Package writers tells the plane suites who updated an object: each update
// is attributed to the field managers whose managedFields entries it added
// or changed, and a Log counts an object's updates by writer over a window.
// The e2e suite uses it to say whose updates opened Crossplane's watch
// circuit breaker on an XR.
package writers

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Unattributed is the writer of an update that changed no managedFields
// entry: a manager writing fields it already owned within the second of its
// last write (an entry's time has a second's precision).
const Unattributed = "unattributed"

// Of names the writer of an update from the object's managedFields before
// and after it: each changed entry's manager, followed by its subresource
// if any ("crossplane status"), sorted and joined by " + ".
func Of(before, after []metav1.ManagedFieldsEntry) string {
	key := func(e metav1.ManagedFieldsEntry) string {
		return strings.TrimSpace(e.Manager + " " + e.Subresource)
	}
	was := map[string]metav1.ManagedFieldsEntry{}
	for _, e := range before {
		was[key(e)+"/"+string(e.Operation)] = e
	}
	var changed []string
	for _, e := range after {
		prev, ok := was[key(e)+"/"+string(e.Operation)]
		if !ok || !timeEqual(prev.Time, e.Time) || fields(prev.FieldsV1) != fields(e.FieldsV1) {
			changed = append(changed, key(e))
		}
	}
	if len(changed) == 0 {
		return Unattributed
	}
	slices.Sort(changed)
	return strings.Join(slices.Compact(changed), " + ")
}

func fields(f *metav1.FieldsV1) string {
	if f == nil {
		return ""
	}
	return f.GetRawString()
}

func timeEqual(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

// A Log records objects' updates, by UID, with their writer and when they
// were seen. It is safe for concurrent use.
type Log struct {
	mu      sync.Mutex
	updates map[types.UID][]update
}

type update struct {
	at     time.Time
	writer string
}

// Record records an update of the object with uid, seen at at, from its
// managedFields before and after.
func (l *Log) Record(uid types.UID, at time.Time, before, after []metav1.ManagedFieldsEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.updates == nil {
		l.updates = map[types.UID][]update{}
	}
	l.updates[uid] = append(l.updates[uid], update{at: at, writer: Of(before, after)})
}

// Before counts the updates of the object with uid seen in the window that
// ends at end (included).
func (l *Log) Before(uid types.UID, end time.Time, window time.Duration) Counts {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := Counts{Window: window, By: map[string]int{}}
	for _, u := range l.updates[uid] {
		if u.at.After(end.Add(-window)) && !u.at.After(end) {
			c.By[u.writer]++
			c.Total++
		}
	}
	return c
}

// Counts are an object's updates in a window, by writer (as Of names them).
type Counts struct {
	Window time.Duration
	Total  int
	By     map[string]int
}

// Of is the number of updates field manager m took part in.
func (c Counts) Of(m string) int {
	n := 0
	for w, count := range c.By {
		for _, entry := range strings.Split(w, " + ") {
			if strings.Fields(entry)[0] == m {
				n += count
				break
			}
		}
	}
	return n
}

// String says the counts, the most frequent writer first.
func (c Counts) String() string {
	writers := slices.SortedFunc(maps.Keys(c.By), func(a, b string) int {
		if c.By[a] != c.By[b] {
			return c.By[b] - c.By[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(writers))
	for _, w := range writers {
		parts = append(parts, fmt.Sprintf("%d by %s", c.By[w], w))
	}
	return fmt.Sprintf("%d updates in the %s before: %s", c.Total, c.Window, strings.Join(parts, ", "))
}
