package xr

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

// memory is what the bridge remembers of each object it reconciles, in
// one place with one forget:
//
//   - what it last wrote of each part it owns (the verdict on a CAPI owner,
//     the provisioned status of an XR, the merge patch of an XR's metadata
//     and spec, a CRD's labels), with the resourceVersion of the cached
//     object it wrote over and the one its write made. A reconcile that
//     reads the object from a cache not yet showing that write must not
//     send the same write a second time: the cache will deliver it, and
//     wake the bridge again if someone undid it since. What was written is
//     kept as its SHA-256: a merge patch is most of an entry, and there is
//     one per XR of the fleet.
//   - the generation change it last made by copying an XR's outputs into
//     its spec (readiness.Mirror), so that the verdict does not drop from
//     Ready to waiting for Crossplane over the bridge's own copy.
//   - the newest Ready and Synced conditions read of an XR: one Crossplane
//     puts back from a stale read (readiness.Replaced) wakes no one and
//     moves no verdict.
//   - the Composition and selector it released an XR's Composition for, so
//     that a read from a cache behind that write releases it only once.
//   - why it last refused an XR's credentials, so that a refusal is counted
//     once (capxp_credentials_refusals_total), not once a reconcile.
//
// After a restart it is empty: the bridge then writes once what a cache
// already shows, and waits once for Crossplane to observe a mirror.
type memory struct {
	mu      sync.Mutex
	objects map[types.UID]*remembered
}

type remembered struct {
	written    map[string]writtenPart
	mirror     readiness.Mirror
	conditions *xrConditions
	released   string
	refused    string
}

type writtenPart struct {
	over, made string
	value      [sha256.Size]byte
}

// xrConditions is an XR's Synced and Ready, as read.
type xrConditions struct{ synced, ready xpv2.Condition }

// of returns what is remembered of uid, making room for it; m.mu is held.
func (m *memory) of(uid types.UID) *remembered {
	if m.objects == nil {
		m.objects = map[types.UID]*remembered{}
	}
	r, ok := m.objects[uid]
	if !ok {
		r = &remembered{written: map[string]writtenPart{}}
		m.objects[uid] = r
	}
	return r
}

// Already reports whether value was written as the object's part to a newer
// version of the object than the one cached. Resource versions are compared
// as Kubernetes 1.35 defines them (KEP-5504); where they cannot be, only the
// version the value was written over counts as older.
func (m *memory) Already(obj metav1.Object, part, value string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.objects[obj.GetUID()]
	if !ok {
		return false
	}
	e, ok := r.written[part]
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

// Record notes that value was written as the object's part over the object
// as cached, making version made.
func (m *memory) Record(obj metav1.Object, made, part, value string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.of(obj.GetUID()).written[part] = writtenPart{over: obj.GetResourceVersion(), made: made, value: sha256.Sum256([]byte(value))}
}

// echo reports whether the bridge's last write of some part of the object
// took it from version from to version to: an update between the two is
// that write and nothing else.
func (m *memory) echo(uid types.UID, from, to string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.objects[uid]
	if !ok {
		return false
	}
	for _, e := range r.written {
		if e.over == from && e.made == to {
			return true
		}
	}
	return false
}

// mirror returns the bridge's last copy of the XR's outputs into its spec.
func (m *memory) mirror(uid types.UID) readiness.Mirror {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.objects[uid]; ok {
		return r.mirror
	}
	return readiness.Mirror{}
}

// mirrored notes a copy of the XR's outputs into its spec.
func (m *memory) mirrored(uid types.UID, mirror readiness.Mirror) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.of(uid).mirror = mirror
}

// read returns the XR's Synced and Ready, each the newest seen of its type,
// and remembers them.
func (m *memory) read(u *unstructured.Unstructured) xrConditions {
	now := xrConditions{synced: readiness.Condition(u.Object, xpv2.TypeSynced), ready: readiness.Condition(u.Object, xpv2.TypeReady)}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.of(u.GetUID())
	if before := r.conditions; before != nil {
		if readiness.Replaced(now.synced, before.synced) {
			now.synced = before.synced
		}
		if readiness.Replaced(now.ready, before.ready) {
			now.ready = before.ready
		}
	}
	r.conditions = &now
	return now
}

// release notes that the XR's Composition was released for key (the
// Composition and the selector), and reports whether it was already.
func (m *memory) release(uid types.UID, key string) (already bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.of(uid)
	already, r.released = r.released == key, key
	return already
}

// refuse notes why an XR's credentials were refused ("" when they may be
// used), and reports whether that is new.
func (m *memory) refuse(uid types.UID, reason string) (changed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.of(uid)
	changed, r.refused = r.refused != reason, reason
	return changed
}

// forget drops all that is remembered of an object.
func (m *memory) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, uid)
}

// The parts of objects the XR reconciler writes, besides apply's.
const (
	partVerdict     = "verdict"
	partProvisioned = "provisioned"
)

// verdictValue is what a verdict condition says; the owner's generation it
// was written at is not part of it.
func verdictValue(c metav1.Condition) string {
	return string(c.Status) + "/" + c.Reason + "/" + c.Message
}
