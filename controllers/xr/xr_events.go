package xr

// Which watch events wake an XR: the changes the bridge reads, not its own or Crossplane's echoes.

import (
	"maps"
	"strings"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/readiness"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

// isProvisioned reports whether an XR reached its contract's milestone:
// provisioned infrastructure, or an initialized control plane.
func isProvisioned(u *unstructured.Unstructured) bool {
	p, _, _ := unstructured.NestedBool(u.Object, "status", "initialization", "provisioned")
	i, _, _ := unstructured.NestedBool(u.Object, "status", "initialization", "controlPlaneInitialized")
	return p || i
}

// xrChanged passes the XR updates that change something the bridge reads:
// its spec, the metadata it reads or writes (its labels, annotations and
// finalizer, owner references, deletion), its status but for the
// conditions, and what Crossplane's Ready and Synced tell the bridge
// (readiness.Observe, given the XR's mirror, and whether Crossplane
// acknowledged a pause); the rest of the status (the outputs) only while
// Crossplane says the XR Ready, before or after the update, since the
// bridge reads outputs only then. Crossplane updates an XR some 30 times while
// composing it; updates that only move Responsive, a transition time, a
// managed field, put back a condition Crossplane had replaced
// (readiness.Replaced), or write Crossplane's own metadata and Composition
// references (crossplaneOwn) wake no one, and neither does the bridge's own
// write when nothing else came between (written.echo). While the XR is
// being deleted every change wakes it.
func (r *xrReconciler) xrChanged(e event.UpdateEvent) bool {
	o, ok := e.ObjectOld.(*unstructured.Unstructured)
	n, ok2 := e.ObjectNew.(*unstructured.Unstructured)
	if !ok || !ok2 {
		return true
	}
	// The old object was read as the new one of the event before; read
	// again, it seeds what a restarted bridge remembers.
	before, now := r.memory.read(o), r.memory.read(n)
	if !equality.Semantic.DeepEqual(o.GetDeletionTimestamp(), n.GetDeletionTimestamp()) {
		return true
	}
	deleting := n.GetDeletionTimestamp() != nil
	if !deleting && r.memory.echo(n.GetUID(), o.GetResourceVersion(), n.GetResourceVersion()) {
		// The reconcile that wrote it knew it.
		return false
	}
	own := r.crossplaneOwn()
	if deleting {
		own = crossplaneOwnNothing
	}
	if !equality.Semantic.DeepEqual(own.metadata(o), own.metadata(n)) {
		return true
	}
	a, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec")
	b, _, _ := unstructured.NestedFieldNoCopy(n.Object, "spec")
	if !equality.Semantic.DeepEqual(own.spec(a), own.spec(b)) {
		return true
	}
	// A new generation made only by Crossplane's own references is not one
	// the bridge waits for Crossplane to observe.
	gen := n.GetGeneration()
	if own.compositionRefs {
		gen = o.GetGeneration()
	} else if gen != o.GetGeneration() {
		return true
	}
	m := r.memory.mirror(n.GetUID())
	so, sn := statusRead(o, o.GetGeneration(), before, m), statusRead(n, gen, now, m)
	if so.observed != sn.observed || so.pauseAcknowledged != sn.pauseAcknowledged {
		return true
	}
	// The outputs are read only once Crossplane says Ready: until then
	// what Crossplane tells the bridge is all that can change its verdict.
	return so.observed.Ready && !equality.Semantic.DeepEqual(so.fields, sn.fields)
}

// crossplaneOwn is what of an XR's metadata and spec is Crossplane's alone,
// written by Crossplane and read by no one else the bridge answers to.
type crossplaneOwn struct {
	// keys: labels and annotations under crossplane.io/ (the composite
	// label), but crossplane.io/paused, which the bridge sets; and every
	// finalizer but the bridge's.
	keys bool
	// compositionRefs: spec.crossplane's Composition and revision
	// references and update policy, which Crossplane writes as it selects.
	compositionRefs bool
}

var crossplaneOwnNothing = crossplaneOwn{}

// crossplaneOwn is what the bridge need not wake for on this kind: an
// InfraCluster's Composition reference is read to re-select it (reselect).
func (r *xrReconciler) crossplaneOwn() crossplaneOwn {
	return crossplaneOwn{keys: true, compositionRefs: !r.contract.Reselects()}
}

// metadata is the metadata of u the bridge reads.
func (c crossplaneOwn) metadata(u *unstructured.Unstructured) [4]any {
	labels, annotations, finalizers := u.GetLabels(), u.GetAnnotations(), any(u.GetFinalizers())
	if c.keys {
		labels, annotations = withoutCrossplaneKeys(labels), withoutCrossplaneKeys(annotations)
		finalizers = controllerutil.ContainsFinalizer(u, infrav1.Finalizer)
	}
	return [4]any{labels, annotations, finalizers, u.GetOwnerReferences()}
}

// withoutCrossplaneKeys returns m without Crossplane's keys; m itself when it
// has none.
func withoutCrossplaneKeys(m map[string]string) map[string]string {
	var out map[string]string
	for k := range m {
		if !strings.HasPrefix(k, "crossplane.io/") || k == infrav1.CrossplanePausedAnnotation {
			continue
		}
		if out == nil {
			out = maps.Clone(m)
		}
		delete(out, k)
	}
	if out == nil {
		return m
	}
	return out
}

// spec is the spec the bridge reads, without Crossplane's Composition
// references when c says so.
func (c crossplaneOwn) spec(v any) any {
	spec, ok := v.(map[string]any)
	if !c.compositionRefs || !ok {
		return v
	}
	xp, ok := spec["crossplane"].(map[string]any)
	if !ok {
		return v
	}
	trimmed := maps.Clone(xp)
	for _, k := range compositionRefFields {
		delete(trimmed, k)
	}
	out := maps.Clone(spec)
	out["crossplane"] = trimmed
	if len(trimmed) == 0 {
		delete(out, "crossplane")
	}
	return out
}

// compositionRefFields are the fields of spec.crossplane Crossplane writes
// as it selects a Composition and its revision.
var compositionRefFields = []string{"compositionRef", "compositionRevisionRef", "compositionUpdatePolicy"}

// xrDeleted forgets what the bridge remembers of a deleted XR.
func (r *xrReconciler) xrDeleted(e event.DeleteEvent) bool {
	r.forget(e.Object.GetUID())
	return true
}

// statusRead is what the bridge reads of an XR's status: all of it but the
// conditions, and what its Ready and Synced c say of generation gen
// (readiness.Observe) and whether Crossplane acknowledged a pause, which
// readies the XR for a move.
func statusRead(u *unstructured.Unstructured, gen int64, c xrConditions, m readiness.Mirror) read {
	status, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status")
	fields, _ := status.(map[string]any)
	out := read{fields: make(map[string]any, len(fields))}
	for k, v := range fields {
		if k != "conditions" {
			out.fields[k] = v
		}
	}
	out.observed = readiness.ObserveConditions(gen, meta.IsPaused(u), c.synced, c.ready, m)
	out.pauseAcknowledged = meta.IsPaused(u) && c.synced.Reason == xpv2.ReasonReconcilePaused
	return out
}

// read is what the bridge reads of an XR's status: its fields but the
// conditions, what Crossplane's Ready and Synced tell it, and whether
// Crossplane acknowledged a pause.
type read struct {
	fields            map[string]any
	observed          verdict.Verdict
	pauseAcknowledged bool
}
