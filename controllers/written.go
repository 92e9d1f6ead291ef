package controllers

import (
	"crypto/sha256"
	"sync"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/capxp/cluster-api-provider-crossplane/bridge/readiness"
)

// written remembers, per object, what the bridge last wrote of each part it
// owns (the verdict on a CAPI owner, the provisioned status of an XR, the
// merge patch of an XR's metadata and spec), the
// resourceVersion of the cached object it wrote over and the one its write
// made. A reconcile that reads the object from a cache not yet showing that
// write (the version it was written over, or one someone else wrote in
// between) must not send the same write a second time: the cache will
// deliver it, and wake the bridge again if someone undid it since. What was
// written is kept as its SHA-256: a merge patch is most of an entry, and
// there is one per XR of the fleet.
type written struct {
	mu      sync.Mutex
	entries map[writtenKey]writtenPart
}

type writtenKey struct {
	uid  types.UID
	part string
}

type writtenPart struct {
	over, made string
	value      [sha256.Size]byte
}

// already reports whether value was written as the object's part to a newer
// version of the object than the one cached. Resource versions are compared
// as Kubernetes 1.35 defines them (KEP-5504); where they cannot be, only the
// version the value was written over counts as older.
func (w *written) already(obj metav1.Object, part, value string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.entries[writtenKey{obj.GetUID(), part}]
	if !ok || e.value != sha256.Sum256([]byte(value)) {
		return false
	}
	cached := obj.GetResourceVersion()
	if cached == e.over {
		return true
	}
	cmp, err := resourceversion.CompareResourceVersion(cached, e.made)
	return err == nil && cmp < 0
}

// record notes that value was written as the object's part over the object
// as cached, making version made.
func (w *written) record(obj metav1.Object, made, part, value string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.entries == nil {
		w.entries = map[writtenKey]writtenPart{}
	}
	w.entries[writtenKey{obj.GetUID(), part}] = writtenPart{over: obj.GetResourceVersion(), made: made, value: sha256.Sum256([]byte(value))}
}

// echo reports whether the bridge's last write of some part of the object
// took it from version from to version to: an update between the two is
// that write and nothing else.
func (w *written) echo(uid types.UID, from, to string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, part := range parts {
		if e, ok := w.entries[writtenKey{uid, part}]; ok && e.over == from && e.made == to {
			return true
		}
	}
	return false
}

// forget drops what is remembered of an object.
func (w *written) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, part := range parts {
		delete(w.entries, writtenKey{uid, part})
	}
}

// The parts of objects the bridge writes.
const (
	partVerdict     = "verdict"
	partProvisioned = "provisioned"
	partPatch       = "patch"
	partLabels      = "labels"
)

var parts = []string{partVerdict, partProvisioned, partPatch, partLabels}

// verdictValue is what a verdict condition says; the owner's generation it
// was written at is not part of it.
func verdictValue(c metav1.Condition) string {
	return string(c.Status) + "/" + c.Reason + "/" + c.Message
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

// newest remembers, per XR, the newest Ready and Synced conditions the bridge
// has read: one Crossplane puts back from a stale read (readiness.Replaced)
// wakes no one and moves no verdict. After a restart it starts from what the
// cache holds.
type newest struct {
	mu      sync.Mutex
	entries map[types.UID]xrConditions
}

// xrConditions is an XR's Synced and Ready, as read.
type xrConditions struct{ synced, ready xpv2.Condition }

// read returns the XR's Synced and Ready, each the newest seen of its type,
// and remembers them.
func (n *newest) read(u *unstructured.Unstructured) xrConditions {
	now := xrConditions{synced: readiness.Condition(u.Object, xpv2.TypeSynced), ready: readiness.Condition(u.Object, xpv2.TypeReady)}
	n.mu.Lock()
	defer n.mu.Unlock()
	if before, ok := n.entries[u.GetUID()]; ok {
		if readiness.Replaced(now.synced, before.synced) {
			now.synced = before.synced
		}
		if readiness.Replaced(now.ready, before.ready) {
			now.ready = before.ready
		}
	}
	if n.entries == nil {
		n.entries = map[types.UID]xrConditions{}
	}
	n.entries[u.GetUID()] = now
	return now
}

func (n *newest) forget(uid types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.entries, uid)
}
