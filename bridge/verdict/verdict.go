// Package verdict is the one shape every decision of the bridge takes:
// whether something holds (an XR's contract, Crossplane's readiness, its
// credentials, a machine's gate) and, when it does not, a stable reason and
// a message that says why. The controllers carry a verdict to the XR's CAPI
// owner as its CrossplaneInfrastructureReady condition.
package verdict

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// A Verdict is the bridge's word on an XR, or on one thing it depends on.
type Verdict struct {
	// Ready is true when it holds (the XR satisfies its contract, the
	// credentials may be used, the gate is open).
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

// Warning reports whether the verdict needs someone to act (a Warning
// event) rather than telling progress (a Normal one).
func (v Verdict) Warning() bool {
	switch v.Reason {
	case infrav1.CompositionFailedReason, infrav1.InvalidOutputsReason, infrav1.InvalidFailureDomainReason,
		infrav1.InvalidBootstrapDataRefReason, infrav1.NotControlledReason, infrav1.ProviderConfigNotFoundReason,
		infrav1.ProviderConfigNotGrantedReason, infrav1.CredentialsSecretNotFoundReason, infrav1.SecretOutsideNamespaceReason:
		return true
	}
	return false
}
