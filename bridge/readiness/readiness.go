// Package readiness reads what Crossplane says about a composite resource:
// its Ready and Synced conditions, for the XR's current generation.
package readiness

import (
	"fmt"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

// Mirror is a generation change the bridge made itself by copying the XR's
// own outputs into its spec (the control plane endpoint, the provider ID):
// From is the generation Crossplane had observed Ready and Synced, To the one
// the copy produced. Crossplane's conditions for From still describe the
// spec at To, so they are not waited for again. The zero Mirror is none.
type Mirror struct {
	From, To int64
}

// Observe reads the XR's Synced and Ready conditions. A condition observed at
// an older generation than the XR's says nothing about the current spec, so
// it counts as not ready (as CAPZ does for Azure Service Operator). A failed
// sync is reported first: it is what stops composition, and Crossplane puts a
// failing composition's message there rather than in Ready.
func Observe(xr *composite.Unstructured, m Mirror) verdict.Verdict {
	return ObserveConditions(xr.GetGeneration(), meta.IsPaused(xr), Condition(xr.Object, xpv2.TypeSynced), Condition(xr.Object, xpv2.TypeReady), m)
}

// ObserveConditions is Observe given an XR's generation, whether it is
// paused, and its Synced and Ready conditions.
func ObserveConditions(gen int64, paused bool, synced, ready xpv2.Condition, m Mirror) verdict.Verdict {
	stale := func(c xpv2.Condition, gen int64) bool {
		if m.To == gen && m.From != 0 && c.ObservedGeneration >= m.From {
			return false
		}
		return stale(c, gen)
	}
	if synced.Reason == xpv2.ReasonReconcilePaused && stale(synced, gen) && !paused {
		// A pause of an older generation, on an XR no longer paused, says
		// nothing about the spec Crossplane composes now: Crossplane has not
		// reconciled the XR since (or writes the pause back from a stale
		// read, Replaced). Taken as not reported, it moves no verdict.
		synced = xpv2.Condition{Type: xpv2.TypeSynced, Status: corev1.ConditionUnknown}
	}

	switch {
	case synced.Status == corev1.ConditionFalse && synced.Reason == xpv2.ReasonReconcilePaused:
		// Paused is not failed: the bridge reports its own pauses, and a
		// just-unpaused XR keeps this until Crossplane reconciles it again.
		return verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: describe("Synced", synced)}
	case synced.Status == corev1.ConditionFalse:
		return verdict.Verdict{Reason: infrav1.CompositionFailedReason, Message: describe("Synced", synced)}
	case ready.Status != corev1.ConditionTrue:
		if ready.Status == "" || ready.Status == corev1.ConditionUnknown && ready.Reason == "" {
			return verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: "Crossplane has not reported the composite resource Ready yet"}
		}
		return verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: describe("Ready", ready)}
	case stale(ready, gen):
		return verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: fmt.Sprintf("Crossplane reported Ready for generation %d; waiting for generation %d", ready.ObservedGeneration, gen)}
	case synced.Status != corev1.ConditionTrue:
		return verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: "Crossplane has not reported the composite resource Synced yet"}
	case stale(synced, gen):
		return verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: fmt.Sprintf("Crossplane reported Synced for generation %d; waiting for generation %d", synced.ObservedGeneration, gen)}
	}
	return verdict.Verdict{Ready: true}
}

// Condition reads one of an object's status conditions in place, as
// composite.Unstructured's GetCondition would but without its round trip of
// the whole status through JSON on every reconcile. A missing condition is
// Unknown, as there.
func Condition(obj map[string]any, t xpv2.ConditionType) xpv2.Condition {
	raw, _, _ := unstructured.NestedFieldNoCopy(obj, "status", "conditions")
	list, _ := raw.([]any)
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok || m["type"] != string(t) {
			continue
		}
		c := xpv2.Condition{Type: t}
		status, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		c.Status = corev1.ConditionStatus(status)
		c.Reason = xpv2.ConditionReason(reason)
		c.Message, _ = m["message"].(string)
		switch g := m["observedGeneration"].(type) {
		case int64:
			c.ObservedGeneration = g
		case float64:
			c.ObservedGeneration = int64(g)
		}
		if ts, ok := m["lastTransitionTime"].(string); ok {
			_ = c.LastTransitionTime.UnmarshalQueryParameter(ts)
		}
		return c
	}
	return xpv2.Condition{Type: t, Status: corev1.ConditionUnknown}
}

// Replaced reports whether a condition c read from an XR is older than one
// already seen of the same type, newest: observed for an older generation,
// or for the same one with an earlier transition. Crossplane never moves a
// condition back, but its server-side apply of an XR's status carries the
// conditions of the read its reconcile started from: from a stale read it
// puts back conditions Crossplane had already replaced, and its next status
// update restores them. On a busy plane Ready and Synced swing some ten
// times while a machine XR provisions. A condition of the same generation and
// transition second is taken as new.
func Replaced(c, newest xpv2.Condition) bool {
	if c.ObservedGeneration != newest.ObservedGeneration {
		return c.ObservedGeneration < newest.ObservedGeneration
	}
	return c.LastTransitionTime.Before(&newest.LastTransitionTime)
}

// stale reports whether a condition was observed for an older generation.
// Crossplane always records the generation; a condition without one (zero)
// is taken at its word.
func stale(c xpv2.Condition, gen int64) bool {
	return c.ObservedGeneration != 0 && c.ObservedGeneration < gen
}

// describe renders a Crossplane condition as "Type Status (Reason): Message".
func describe(name string, c xpv2.Condition) string {
	s := fmt.Sprintf("%s is %s", name, c.Status)
	if c.Reason != "" {
		s += fmt.Sprintf(" (%s)", c.Reason)
	}
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}
