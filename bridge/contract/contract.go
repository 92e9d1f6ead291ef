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

	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/outputs"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

// Evaluate is the contract rule: an XR satisfies its contract when Crossplane
// reports it Ready and Synced for its current generation and its contract
// outputs are present and valid. Crossplane's words come first, as they say
// what stops composition; then a missing output (the composition has not
// reported it yet) or an invalid one (naming the field and the value).
func Evaluate(obs verdict.Verdict, errs field.ErrorList) verdict.Verdict {
	switch {
	case !obs.Ready:
		return verdict.Verdict{Reason: obs.Reason, Message: obs.Message}
	case len(errs) == 0:
		return verdict.Verdict{Ready: true, Reason: infrav1.ContractReadyReason}
	case outputs.Missing(errs):
		return verdict.Verdict{Reason: infrav1.MissingOutputsReason, Message: errs.ToAggregate().Error()}
	default:
		return verdict.Verdict{Reason: infrav1.InvalidOutputsReason, Message: errs.ToAggregate().Error()}
	}
}

// Provisioned is CAPI's v1beta2 provisioned milestone: reached the first time
// the XR satisfies its contract, and kept from then on, whatever the verdict
// says later (a pause, a credentials hold, a deletion, a manager restart).
func Provisioned(was bool, v verdict.Verdict) bool { return was || v.Ready }

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
