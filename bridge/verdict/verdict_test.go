package verdict

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

func TestCondition(t *testing.T) {
	cases := map[string]struct {
		v    Verdict
		gen  int64
		want metav1.Condition
	}{
		"Ready": {v: Verdict{Ready: true, Reason: infrav1.ContractReadyReason}, gen: 3,
			want: metav1.Condition{Type: infrav1.CrossplaneInfrastructureReadyCondition, Status: metav1.ConditionTrue, Reason: infrav1.ContractReadyReason, ObservedGeneration: 3}},
		"NotReady": {v: NotReady(infrav1.WaitingForBootstrapDataReason, "Waiting for %s", "m"), gen: 1,
			want: metav1.Condition{Type: infrav1.CrossplaneInfrastructureReadyCondition, Status: metav1.ConditionFalse, Reason: infrav1.WaitingForBootstrapDataReason, Message: "Waiting for m", ObservedGeneration: 1}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.v.Condition(tc.gen)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Condition(): -want, +got:\n%s", diff)
			}
			if !tc.v.Same(&got) {
				t.Errorf("Same(Condition()) = false, want true")
			}
		})
	}
}
