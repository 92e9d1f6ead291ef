package xrd

import (
	"maps"
	"testing"
	"time"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/xrd"
	"github.com/capxp/cluster-api-provider-crossplane/compositions"
)

// machineXRD is the shipped CrossplaneMachine XRD, edited.
func machineXRD(t *testing.T, edit func(*xpextv2.CompositeResourceDefinition)) *xpextv2.CompositeResourceDefinition {
	t.Helper()
	u, err := compositions.Read("xrds/crossplanemachines.yaml")
	if err != nil {
		t.Fatal(err)
	}
	x := &xpextv2.CompositeResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, x); err != nil {
		t.Fatal(err)
	}
	x.Generation = 3
	if edit != nil {
		edit(x)
	}
	return x
}

func TestDecide(t *testing.T) {
	shipped := machineXRD(t, nil)
	a, p := xrd.Check(shipped)
	if p != nil {
		t.Fatalf("the shipped XRD is not adaptable: %v", p)
	}
	version := a.GVK.Version
	labelled := func(x *xpextv2.CompositeResourceDefinition) {
		if l := contractLabels(x.Labels, version); l != nil {
			x.Labels = l
		}
	}
	saying := func(reason, msg string) func(*xpextv2.CompositeResourceDefinition) {
		return func(x *xpextv2.CompositeResourceDefinition) {
			labelled(x)
			x.Status.SetConditions(xpv2.Condition{Type: xpv2.ConditionType(infrav1.ContractAdaptedCondition), Reason: xpv2.ConditionReason(reason), Message: msg})
		}
	}
	cond := func(s metav1.ConditionStatus, reason, msg string) *metav1.Condition {
		return &metav1.Condition{Type: infrav1.ContractAdaptedCondition, Status: s, Reason: reason, Message: msg, ObservedGeneration: 3}
	}
	adapted := cond(metav1.ConditionTrue, infrav1.ContractAdaptedReason, "CrossplaneMachine "+a.GVK.GroupVersion().String()+" is a CAPI InfraMachine")
	forbidden := "The bridge may not watch crossplanemachines." + a.GVK.Group + ": grant it with a ClusterRole labelled " + xrd.AggregateToBridgeLabel + ": \"true\" (`capxp xrd adopt` prints one from the XRD)"
	unknown := machineXRD(t, func(x *xpextv2.CompositeResourceDefinition) { x.Labels[infrav1.ContractLabel] = "Nope" })
	_, problem := xrd.Check(unknown)
	notAdapted := "Not adapted: " + problem.Error()
	noMAP := admissionGap("crossplanemachines", false, true)
	noPolicies := admissionGap("crossplanemachines", false, false)
	served := func(o observed) observed { o.mutatingPolicies, o.validatingPolicies = true, true; return o }

	cases := map[string]struct {
		reason string
		o      observed
		want   plan
	}{
		"Gone": {
			reason: "a deleted XRD's kind stops, and the admission objects no longer name it",
			o:      observed{name: "x"},
			want:   plan{forget: true, stop: true, syncAdmission: true},
		},
		"NoContract": {
			reason: "an XRD whose contract label was removed is let go of: its kind stops and its XRs lose the finalizer",
			o: observed{name: "x", xrd: machineXRD(t, func(x *xpextv2.CompositeResourceDefinition) {
				delete(x.Labels, infrav1.ContractLabel)
			})},
			want: plan{forget: true, stop: true, syncAdmission: true, release: true},
		},
		"Deleting": {
			reason: "a deleting XRD's kind keeps running until Crossplane has deleted its XRs",
			o: observed{name: "x", xrd: machineXRD(t, func(x *xpextv2.CompositeResourceDefinition) {
				x.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
			})},
			want: plan{},
		},
		"Problem": {
			reason: "an XRD that declares the contract wrongly is let go of, and says why, with an event the first time",
			o:      observed{name: "x", xrd: unknown},
			want: plan{stop: true, syncAdmission: true, release: true,
				warning: &warning{reason: problem.Reason, message: notAdapted}, condition: cond(metav1.ConditionFalse, problem.Reason, notAdapted)},
		},
		"ProblemSaidAlready": {
			reason: "the event is not sent again while the condition says it",
			o: observed{name: "x", xrd: machineXRD(t, func(x *xpextv2.CompositeResourceDefinition) {
				x.Labels[infrav1.ContractLabel] = "Nope"
				x.Status.SetConditions(xpv2.Condition{Type: xpv2.ConditionType(infrav1.ContractAdaptedCondition), Reason: xpv2.ConditionReason(problem.Reason), Message: notAdapted})
			})},
			want: plan{stop: true, syncAdmission: true, release: true, condition: cond(metav1.ConditionFalse, problem.Reason, notAdapted)},
		},
		"Unlabelled": {
			reason: "the contract's labels are added for Crossplane to copy onto the CRD, and the admission objects applied before the CRD exists",
			o: served(observed{name: "x", xrd: machineXRD(t, func(x *xpextv2.CompositeResourceDefinition) {
				delete(x.Labels, infrav1.CAPIContractLabel)
				delete(x.Labels, infrav1.ClusterctlLabel)
			})}),
			want: plan{labels: shipped.Labels, syncAdmission: true,
				condition: cond(metav1.ConditionFalse, infrav1.WaitingForCRDReason, "Waiting for Crossplane to establish CRD "+shipped.Name+" with label "+infrav1.CAPIContractLabel+" including "+version)},
		},
		"ProviderLabelDropped": {
			reason: "clusterctl's provider label would have clusterctl delete the XRD with the provider",
			o: served(observed{name: "x", crdReady: true, xrd: machineXRD(t, func(x *xpextv2.CompositeResourceDefinition) {
				labelled(x)
				x.Labels[infrav1.ProviderLabel] = infrav1.ProviderName
			})}),
			want: plan{labels: shipped.Labels, syncAdmission: true, ensure: a, condition: adapted},
		},
		"AnotherVersion": {
			reason: "a version the contract label lacks is added beside those it has",
			o: served(observed{name: "x", xrd: machineXRD(t, func(x *xpextv2.CompositeResourceDefinition) {
				x.Labels[infrav1.CAPIContractLabel] = "v1alpha0"
			})}),
			want: plan{labels: func() map[string]string {
				l := maps.Clone(shipped.Labels)
				l[infrav1.CAPIContractLabel] = "v1alpha0_" + version
				return l
			}(), syncAdmission: true,
				condition: cond(metav1.ConditionFalse, infrav1.WaitingForCRDReason, "Waiting for Crossplane to establish CRD "+shipped.Name+" with label "+infrav1.CAPIContractLabel+" including "+version)},
		},
		"Adapted": {
			reason: "a labelled XRD whose CRD is ready is adapted: its kind runs",
			o:      served(observed{name: "x", crdReady: true, xrd: machineXRD(t, labelled)}),
			want:   plan{syncAdmission: true, ensure: a, condition: adapted},
		},
		"Forbidden": {
			reason: "a kind the bridge may not work with stops, says which grant it needs and is looked at again later",
			o:      served(observed{name: "x", crdReady: true, denied: []string{"watch crossplanemachines." + a.GVK.Group}, xrd: machineXRD(t, labelled)}),
			want: plan{syncAdmission: true, stop: true, requeue: recheckAccessAfter,
				warning: &warning{reason: infrav1.ForbiddenReason, message: forbidden}, condition: cond(metav1.ConditionFalse, infrav1.ForbiddenReason, forbidden)},
		},
		"ForbiddenSaidAlready": {
			reason: "no second event while the condition says it",
			o:      served(observed{name: "x", crdReady: true, denied: []string{"watch crossplanemachines." + a.GVK.Group}, xrd: machineXRD(t, saying(infrav1.ForbiddenReason, forbidden))}),
			want: plan{syncAdmission: true, stop: true, requeue: recheckAccessAfter,
				condition: cond(metav1.ConditionFalse, infrav1.ForbiddenReason, forbidden)},
		},
		"NoMutatingPolicies": {
			reason: "without MutatingAdmissionPolicy the kind still runs, and the XRD says what admission does instead",
			o:      observed{name: "x", crdReady: true, validatingPolicies: true, xrd: machineXRD(t, labelled)},
			want: plan{syncAdmission: true, ensure: a,
				warning: &warning{reason: infrav1.AdmissionUnavailableReason, message: noMAP}, condition: cond(metav1.ConditionFalse, infrav1.AdmissionUnavailableReason, noMAP)},
		},
		"NoPolicies": {
			reason: "without either policy kind nothing holds new XRs, and the XRD says so",
			o:      observed{name: "x", crdReady: true, xrd: machineXRD(t, saying(infrav1.AdmissionUnavailableReason, noPolicies))},
			want:   plan{syncAdmission: true, ensure: a, condition: cond(metav1.ConditionFalse, infrav1.AdmissionUnavailableReason, noPolicies)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := decide(tc.o)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(plan{}, warning{})); diff != "" {
				t.Errorf("%s\ndecide(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestAdmissionGap(t *testing.T) {
	if got := admissionGap("xs", true, true); got != "" {
		t.Errorf("both served: %q, want none", got)
	}
	if got := admissionGap("xs", true, false); got != admissionGap("xs", false, false) {
		t.Errorf("without ValidatingAdmissionPolicy nothing holds new XRs, whatever else is served: %q", got)
	}
}
