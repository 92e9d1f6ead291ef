package xr

// The mapping onto the contract: decided from what was observed, applied in
// act to the working copy the deferred write sends.

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capxp/cluster-api-provider-crossplane/bridge/contract"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/readiness"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/apply"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/contracts"
)

// mapping is what an active XR's contract asks, decided from what was
// observed: the verdict and, once the XR satisfies its contract, the
// outputs copied into its spec, what is published besides it and the
// provisioned milestone.
type mapping struct {
	verdict verdict.Verdict
	// set copies the outputs into a spec; nil until the XR satisfies its
	// contract.
	set func(*unstructured.Unstructured)
	// observed is the generation Crossplane had observed Ready and Synced
	// when set copied the outputs.
	observed int64
	// publication is what the contract writes besides the XR.
	publication contracts.Publication
	// provisioned: the XR reached the milestone, now or before.
	provisioned bool
	// milestone: the contract status is applied (not while a cache behind
	// the bridge's own write of it still shows the XR not provisioned).
	milestone bool
	// readySince is when Crossplane reported the XR Ready, when it reaches
	// the milestone now.
	readySince time.Time
	// event is the Provisioned event's message, the first time; "" for none.
	event string
	// again is when to look again.
	again ctrl.Result
}

// decideMapping decides an active XR's mapping onto its contract from what
// was observed: the contract's outputs, Crossplane's readiness as the
// bridge last read it, and, once they say Ready, what the contract
// publishes besides the XR.
func (r *xrReconciler) decideMapping(s *scope) *mapping {
	u := &s.XR.Unstructured
	set, provisioned, errs := r.contract.Outputs(&s.Scope)
	// The newest Ready and Synced read, not one Crossplane put back from a
	// stale read (readiness.Replaced).
	c := s.recalled.conditions
	m := &mapping{verdict: contract.Evaluate(readiness.ObserveConditions(u.GetGeneration(), false, c.synced, c.ready, s.recalled.mirror), errs)}
	if m.verdict.Ready {
		m.publication = r.contract.Publication(&s.Scope)
		m.again = m.publication.Again
		if m.publication.Held != nil {
			m.verdict = *m.publication.Held
		}
	}
	if m.verdict.Ready {
		m.set = set.Set
		m.observed = min(c.ready.ObservedGeneration, c.synced.ObservedGeneration)
	}
	// A cache behind the bridge's own write of the milestone still shows
	// the XR not provisioned: it is, and is neither written nor announced
	// again.
	stale := !isProvisioned(u) && s.recalled.provisioned
	was := isProvisioned(u) || stale
	m.provisioned = contract.Provisioned(was, m.verdict)
	// Every field, always: a server-side apply that leaves one out
	// releases it. Nothing is written before provisioning: absent is not
	// provisioned, and provisioned never goes back to false.
	m.milestone = m.provisioned && !stale
	if m.milestone && !was && c.ready.Status == corev1.ConditionTrue {
		m.readySince = c.ready.LastTransitionTime.Time
	}
	if m.provisioned && !was {
		m.event = provisioned
	}
	return m
}

// applyMapping carries out a mapping: what the contract publishes, the
// outputs into the spec, the verdict, the block-move annotation and the
// milestone, and the Provisioned event.
func (r *xrReconciler) applyMapping(ctx context.Context, s *scope, m *mapping) error {
	if err := r.contract.Publish(ctx, &s.Scope, m.publication); err != nil {
		return err
	}
	u := &s.XR.Unstructured
	if m.set != nil {
		m.set(u)
		s.mirror = s.before.DeepCopy()
		m.set(s.mirror)
		s.observed = m.observed
	}
	s.verdict = &m.verdict
	r.blockMove(ctx, s, m.provisioned)
	if m.milestone {
		s.status = &apply.StatusApply{Fields: r.contract.Milestone(u)}
		s.readySince = m.readySince
	}
	if m.event != "" {
		s.Event(corev1.EventTypeNormal, "Provisioned", m.event)
	}
	return nil
}
