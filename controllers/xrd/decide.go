package xrd

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/lifecycle"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/xrd"
)

// observed is what one reconcile of an XRD read. It is read in two beats:
// the XRD first, then, for an XRD that declares the contract correctly, its
// CRD, the admission kinds the API server serves and, once the CRD is ready,
// what the bridge may not do with the kind's XRs.
type observed struct {
	// name is the XRD's; xrd is nil when it is gone.
	name string
	xrd  *xpextv2.CompositeResourceDefinition
	// crdReady: the XRD's CRD is established, and its contract label
	// includes the version the bridge adapts.
	crdReady bool
	// mutatingPolicies and validatingPolicies: the API server serves
	// MutatingAdmissionPolicy and ValidatingAdmissionPolicy.
	mutatingPolicies, validatingPolicies bool
	// denied are the verbs the bridge may not use on the kind's XRs; read
	// only once the CRD is ready.
	denied []string
}

// plan is what a reconcile of an XRD does, in act's order.
type plan struct {
	// forget drops the XRD from capxp_xrd_adaptation.
	forget bool
	// stop stops the kind's controller.
	stop bool
	// labels, when set, are the XRD's labels as they must be.
	labels map[string]string
	// syncAdmission applies the admission objects for every adapted kind.
	syncAdmission bool
	// release removes the bridge's finalizer from every XR of the kind.
	release bool
	// ensure runs the kind's controller.
	ensure *xrd.Adaptation
	// warning is an event on the XRD (its reason and message), sent only
	// when its condition does not say it already.
	warning *warning
	// condition is the XRD's CAPIContractAdapted condition.
	condition *metav1.Condition
	requeue   time.Duration
}

type warning struct{ reason, message string }

// recheckAccessAfter is how often the bridge looks again at a kind it may
// not work with: RBAC changes wake nothing here.
const recheckAccessAfter = lifecycle.RecheckAccessAfter

// decide decides what a reconcile of an XRD does from what it observed.
func decide(o observed) plan {
	x := o.xrd
	switch {
	case x == nil:
		return plan{forget: true, stop: true, syncAdmission: true}
	case !hasContractLabel(x):
		return plan{forget: true, stop: true, syncAdmission: true, release: true}
	case !x.DeletionTimestamp.IsZero():
		// Crossplane deletes every XR of the kind before the CRD goes: the
		// kind's controller keeps running until then, so that each XR's
		// composed resources are deleted and its finalizer released.
		return plan{}
	}
	a, p := xrd.Check(x)
	if p != nil {
		msg := "Not adapted: " + p.Error()
		return plan{stop: true, syncAdmission: true, release: true,
			warning: newWarning(x, p.Reason, msg), condition: condition(x, metav1.ConditionFalse, p.Reason, msg)}
	}
	// CAPI reads the contract version off the CRD, clusterctl moves the
	// kinds whose CRDs carry its label, and Crossplane copies an XRD's
	// labels onto its CRD: declaring the contract is enough. New XRs of the
	// kind must be held, and references to credentials the namespace may
	// not use refused, at admission, before the kind's controller runs (and
	// before its CRD exists).
	out := plan{labels: contractLabels(x.GetLabels(), a.GVK.Version), syncAdmission: true}
	if !o.crdReady {
		out.condition = condition(x, metav1.ConditionFalse, infrav1.WaitingForCRDReason,
			fmt.Sprintf("Waiting for Crossplane to establish CRD %s with label %s including %s", x.Name, infrav1.CAPIContractLabel, a.GVK.Version))
		return out
	}
	// A platform team's kind needs the bridge granted it (the aggregated
	// ClusterRole): until then, say so rather than watch and fail.
	if len(o.denied) > 0 {
		msg := fmt.Sprintf("The bridge may not %s: grant it with a ClusterRole labelled %s: \"true\" (`capxp xrd adopt` prints one from the XRD)",
			strings.Join(o.denied, ", "), xrd.AggregateToBridgeLabel)
		out.stop, out.requeue = true, recheckAccessAfter
		out.warning, out.condition = newWarning(x, infrav1.ForbiddenReason, msg), condition(x, metav1.ConditionFalse, infrav1.ForbiddenReason, msg)
		return out
	}
	out.ensure = a
	// Where the API server cannot hold new XRs, the kind is still served,
	// the XRD says what admission does instead, and every XR's credentials
	// are checked as ever.
	if gap := admissionGap(x.Spec.Names.Plural, o.mutatingPolicies, o.validatingPolicies); gap != "" {
		out.warning, out.condition = newWarning(x, infrav1.AdmissionUnavailableReason, gap), condition(x, metav1.ConditionFalse, infrav1.AdmissionUnavailableReason, gap)
		return out
	}
	out.condition = condition(x, metav1.ConditionTrue, infrav1.ContractAdaptedReason,
		fmt.Sprintf("%s %s is a CAPI %s", a.GVK.Kind, a.GVK.GroupVersion(), a.Contract))
	return out
}

func hasContractLabel(x *xpextv2.CompositeResourceDefinition) bool {
	_, ok := x.GetLabels()[infrav1.ContractLabel]
	return ok
}

func condition(x *xpextv2.CompositeResourceDefinition, s metav1.ConditionStatus, reason, msg string) *metav1.Condition {
	return &metav1.Condition{Type: infrav1.ContractAdaptedCondition, Status: s, Reason: reason, Message: msg, ObservedGeneration: x.Generation}
}

// newWarning is a warning event, unless the XRD's condition says it
// already: each is sent once, as the condition changes.
func newWarning(x *xpextv2.CompositeResourceDefinition, reason, msg string) *warning {
	c := x.Status.GetCondition(xpv2.ConditionType(infrav1.ContractAdaptedCondition))
	if string(c.Reason) == reason && c.Message == msg {
		return nil
	}
	return &warning{reason: reason, message: msg}
}

// contractLabels are an XRD's labels with the adapted version in CAPI's
// contract label and clusterctl's label; nil when they are so already.
func contractLabels(have map[string]string, version string) map[string]string {
	want := maps.Clone(have)
	if want == nil {
		want = map[string]string{}
	}
	want[infrav1.CAPIContractLabel] = withVersion(want[infrav1.CAPIContractLabel], version)
	want[infrav1.ClusterctlLabel] = ""
	// With clusterctl's provider label beside its own, `clusterctl upgrade`
	// and `clusterctl delete` would delete the XRD, and with it every XR of
	// the kind and what they composed.
	if want[infrav1.ProviderLabel] == infrav1.ProviderName {
		delete(want, infrav1.ProviderLabel)
	}
	if maps.Equal(have, want) {
		return nil
	}
	return want
}

// withVersion adds a version to a CAPI contract label value, a list
// separated by underscores.
func withVersion(value, version string) string {
	if value == "" {
		return version
	}
	if slices.Contains(strings.Split(value, "_"), version) {
		return value
	}
	return value + "_" + version
}

// admissionGap says what an API server that serves no admission policy kind
// CAPXP needs does to new XRs of a kind; empty when it serves both. Without
// MutatingAdmissionPolicy the release policy still refuses every XR created
// without the hold, so nothing composes unchecked; without either, nothing
// holds them.
func admissionGap(plural string, mutating, validating bool) string {
	switch {
	case mutating && validating:
		return ""
	case !validating:
		return fmt.Sprintf("This API server serves neither MutatingAdmissionPolicy nor ValidatingAdmissionPolicy of %s (Kubernetes 1.36 or later): new %s are not held at admission, and Crossplane may compose them before the bridge has checked their credentials and held them",
			admissionregv1.SchemeGroupVersion, plural)
	}
	return fmt.Sprintf("This API server serves no %s MutatingAdmissionPolicy (Kubernetes 1.36 or later), so it cannot hold new %s itself: it admits one only when created with annotation %s: \"true\", which the bridge lifts once its credentials are checked",
		admissionregv1.SchemeGroupVersion, plural, infrav1.CrossplanePausedAnnotation)
}
