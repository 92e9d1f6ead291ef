package xr

// What the bridge writes, and how: the one deferred write of an XR's
// reconcile (its metadata and spec, its contract status, its owner's verdict,
// its events), and the helpers every controller here writes through: a merge
// patch sent only when it changes something, a server-side apply of only the
// status fields and conditions the bridge owns.

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/bridge/readiness"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/apply"
)

// write sends what the reconcile decided, each part only when it differs
// from what is stored: one merge patch of the XR's metadata and spec, one
// server-side apply of its contract status fields, one of the owner's
// condition; then the events.
func (r *xrReconciler) write(ctx context.Context, s *scope) error {
	var errs []error
	gen := s.before.GetGeneration()
	mirrorOnly := s.mirror != nil && equality.Semantic.DeepEqual(s.mirror.Object["spec"], s.XR.Object["spec"])
	kind := s.XR.GetKind()
	rv := s.before.GetResourceVersion()
	// The working copy is what is wanted: no copy of it to mutate.
	if err := apply.PatchTo(ctx, r.client, &r.memory, s.before, &unstructured.Unstructured{Object: s.XR.Object}); err != nil {
		// Nothing else is written on a stale read.
		return err
	}
	if s.before.GetResourceVersion() != rv {
		writes.WithLabelValues(targetXR, kind).Inc()
	}
	if mirrorOnly && s.before.GetGeneration() != gen && s.observed != 0 {
		r.memory.mirrored(s.XR.GetUID(), readiness.Mirror{From: s.observed, To: s.before.GetGeneration()})
	}
	if s.status != nil {
		made, err := s.status.Apply(ctx, r.client, &s.XR.Unstructured)
		if err == nil && made != "" {
			r.memory.Record(s.before, made, partProvisioned, "true")
			writes.WithLabelValues(targetXRStatus, kind).Inc()
			observeProvisioned(kind, s.readySince, time.Now())
		}
		errs = append(errs, err)
	}
	if s.verdict != nil && s.Owner != nil {
		errs = append(errs, r.writeVerdict(ctx, s))
	}
	for _, e := range s.Events {
		r.recorder.Eventf(s.XR, nil, e.Type, e.Reason, actionReconcile, "%s", e.Message)
	}
	return kerrors.NewAggregate(errs)
}

// writeVerdict applies the verdict as the owner's
// CrossplaneInfrastructureReady condition when it says something new, and
// records the change as an event on the XR.
func (r *xrReconciler) writeVerdict(ctx context.Context, s *scope) error {
	old, found := ownerCondition(s.Owner, r.contract.ConditionType())
	if found && s.verdict.Same(&old) {
		// The verdict is about the XR: a new generation of the owner (CAPI
		// copying providerID or the bootstrap data secret name into its
		// spec) that leaves it as it was is not written again.
		return nil
	}
	if !found && s.verdict.Shown() {
		// CAPI's own conditions say it already; the condition appears with
		// the first verdict they do not, and follows every verdict after.
		return nil
	}
	c := s.verdict.Condition(s.Owner.GetGeneration())
	c.Type = r.contract.ConditionType()
	if r.memory.Already(s.Owner, partVerdict, verdictValue(c)) {
		// The cache has not caught up with this very write yet: it was
		// sent, and its event recorded, already.
		return nil
	}
	// Converted only to be written: most reconciles write no verdict.
	owner, err := apply.ToUnstructured(r.client, s.Owner)
	if err != nil {
		return errors.Wrap(err, errWriteOwner)
	}
	st := &apply.StatusApply{}
	st.Condition(owner, c)
	made, err := st.Apply(ctx, r.client, owner)
	if err != nil {
		return errors.Wrap(err, errWriteOwner)
	}
	// Only a verdict someone must act on becomes an event too; progress is
	// the condition's to say (and Provisioned, once, the XR's).
	if (!found || !s.verdict.Same(&old)) && s.verdict.Warning() {
		r.recorder.Eventf(s.XR, nil, corev1.EventTypeWarning, s.verdict.Reason, actionReconcile, "%s", s.verdict.Message)
	}
	r.memory.Record(s.Owner, made, partVerdict, verdictValue(c))
	if made != "" {
		writes.WithLabelValues(targetOwnerCondition, s.XR.GetKind()).Inc()
		verdicts.WithLabelValues(c.Reason, s.XR.GetKind()).Inc()
	}
	return nil
}

// ownerCondition is the bridge's condition of a type on a CAPI owner, read
// from the typed object.
func ownerCondition(owner client.Object, typ string) (metav1.Condition, bool) {
	g, ok := owner.(conditions.Getter)
	if !ok {
		return metav1.Condition{}, false
	}
	c := conditions.Get(g, typ)
	if c == nil {
		return metav1.Condition{}, false
	}
	return *c, true
}
