package controllers

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capxp/cluster-api-provider-crossplane/bridge/readiness"
)

// written remembers, per CAPI owner, the verdict the bridge last applied and
// the resourceVersion of the cached object it applied it over. A reconcile
// that reads the owner from a cache not yet showing that write sees exactly
// that resourceVersion again; it must not apply the same verdict a second
// time. Any other write to the owner changes its resourceVersion, so a
// verdict removed or changed by someone else is still restored.
type written struct {
	mu      sync.Mutex
	entries map[types.UID]writtenVerdict
}

type writtenVerdict struct {
	over      string
	condition metav1.Condition
}

// already reports whether c was applied over the owner exactly as cached.
func (w *written) already(owner metav1.Object, c metav1.Condition) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.entries[owner.GetUID()]
	return ok && e.over == owner.GetResourceVersion() && sameCondition(e.condition, c)
}

// record notes that c was applied over the owner as cached.
func (w *written) record(owner metav1.Object, c metav1.Condition) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.entries == nil {
		w.entries = map[types.UID]writtenVerdict{}
	}
	w.entries[owner.GetUID()] = writtenVerdict{over: owner.GetResourceVersion(), condition: c}
}

// forget drops what is remembered of an owner.
func (w *written) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.entries, uid)
}

func sameCondition(a, b metav1.Condition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message && a.ObservedGeneration == b.ObservedGeneration
}

// mirrors remembers, per XR, the generation change the bridge last made by
// copying the XR's outputs into its spec (readiness.Mirror), so that the
// verdict does not drop from Ready to waiting for Crossplane over the
// bridge's own copy. After a restart it is empty: the verdict then waits
// once for Crossplane to observe the copy, as it would for any change.
type mirrors struct {
	mu      sync.Mutex
	entries map[types.UID]readiness.Mirror
}

func (m *mirrors) get(uid types.UID) readiness.Mirror {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.entries[uid]
}

func (m *mirrors) record(uid types.UID, mirror readiness.Mirror) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[types.UID]readiness.Mirror{}
	}
	m.entries[uid] = mirror
}

func (m *mirrors) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, uid)
}
