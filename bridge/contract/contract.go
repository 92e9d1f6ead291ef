// Package contract is the bridge's verdict on a composite resource: whether it
// satisfies its CAPI contract now and, when it does not, why. The verdict is
// computed from what Crossplane reports (package readiness) and from the
// contract outputs (package outputs), by pure functions.
//
// The verdict is not written to the XR: every condition type on an XR is
// Crossplane's to write on the real engine (it resets non-system conditions
// on a fatal pipeline result and server-side-applies the conditions it read on
// success), so a second writer there would fight it. The controllers carry the
// verdict to the XR's CAPI owner as its CrossplaneInfrastructureReady
// condition, which only the bridge writes, and record transitions as events on
// the XR.
package contract

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/outputs"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/readiness"
)

// A Verdict is the bridge's word on an XR.
type Verdict struct {
	// Ready is true when the XR satisfies its contract.
	Ready bool
	// Reason is a stable CamelCase reason.
	Reason string
	// Message says why not, deterministically: no timestamps, no transient
	// API errors.
	Message string
}

// NotReady returns a verdict that is not ready for a reason.
func NotReady(reason, format string, args ...any) Verdict {
	return Verdict{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Evaluate is the contract rule: an XR satisfies its contract when Crossplane
// reports it Ready and Synced for its current generation and its contract
// outputs are present and valid. Crossplane's words come first, as they say
// what stops composition; then a missing output (the composition has not
// reported it yet) or an invalid one (naming the field and the value).
func Evaluate(obs readiness.Observation, errs field.ErrorList) Verdict {
	switch {
	case !obs.Ready:
		return Verdict{Reason: obs.Reason, Message: obs.Message}
	case len(errs) == 0:
		return Verdict{Ready: true, Reason: infrav1.ContractReadyReason}
	case outputs.Missing(errs):
		return Verdict{Reason: infrav1.MissingOutputsReason, Message: errs.ToAggregate().Error()}
	default:
		return Verdict{Reason: infrav1.InvalidOutputsReason, Message: errs.ToAggregate().Error()}
	}
}

// Provisioned is CAPI's v1beta2 provisioned milestone: reached the first time
// the XR satisfies its contract, and kept from then on, whatever the verdict
// says later (a pause, a credentials hold, a deletion, a manager restart).
func Provisioned(was bool, v Verdict) bool { return was || v.Ready }

// Shown reports whether CAPI's own conditions already say what the verdict
// says, so that the owner needs no condition of the bridge's for it: the
// contract satisfied (the owner's provisioned milestone), the XR being
// composed (CAPI mirrors Crossplane's Ready into InfrastructureReady), a
// machine waiting for its Machine's bootstrap data (BootstrapConfigReady) or
// for its cluster's infrastructure (the Cluster's InfrastructureReady).
func (v Verdict) Shown() bool {
	switch v.Reason {
	case infrav1.WaitingForCompositionReason, infrav1.WaitingForBootstrapDataReason, infrav1.WaitingForClusterInfrastructureReason:
		return true
	}
	return v.Ready
}

// Condition renders the verdict as the CrossplaneInfrastructureReady
// condition of a CAPI object at the given generation.
func (v Verdict) Condition(generation int64) metav1.Condition {
	c := metav1.Condition{
		Type:               infrav1.CrossplaneInfrastructureReadyCondition,
		Status:             metav1.ConditionFalse,
		Reason:             v.Reason,
		Message:            v.Message,
		ObservedGeneration: generation,
	}
	if v.Ready {
		c.Status = metav1.ConditionTrue
	}
	return c
}

// Same reports whether a condition already says what the verdict says.
func (v Verdict) Same(c *metav1.Condition) bool {
	if c == nil {
		return false
	}
	return (c.Status == metav1.ConditionTrue) == v.Ready && c.Reason == v.Reason && c.Message == v.Message
}

// Waiting names the things a deletion still waits for: how many, and the
// first few.
func Waiting(what string, names []string) string {
	return fmt.Sprintf("Waiting for %d %s to be deleted: %s", len(names), what, List(names))
}

// List joins names, showing the first few.
func List(names []string) string {
	const shown = 5
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:shown], ", ") + fmt.Sprintf(" and %d more", len(names)-shown)
}
