package contracts

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

func TestOwnerChanged(t *testing.T) {
	verdict := func(reason string) []metav1.Condition {
		return []metav1.Condition{{Type: infrav1.CrossplaneInfrastructureReadyCondition, Status: metav1.ConditionFalse, Reason: reason}}
	}
	pool := func(gen int64, deleting bool, ready int32, conds []metav1.Condition) client.Object {
		mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		if deleting {
			mp.DeletionTimestamp = ptr.To(metav1.Now())
		}
		mp.Status.ReadyReplicas = ptr.To(ready)
		mp.Status.Conditions = conds
		return mp
	}
	machine := func(gen int64, nodeName string) client.Object {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		m.Status.NodeRef = clusterv1.MachineNodeReference{Name: nodeName}
		return m
	}
	cases := map[string]struct {
		reason   string
		old, new client.Object
		want     bool
	}{
		"PoolScaled":           {"a new generation (replicas) concerns the XR", pool(1, false, 2, nil), pool(2, false, 2, nil), true},
		"PoolDeleting":         {"the start of a deletion concerns the XR", pool(1, false, 2, nil), pool(1, true, 2, nil), true},
		"PoolStatusOnly":       {"CAPI's status writes do not", pool(1, false, 2, nil), pool(1, false, 3, nil), false},
		"PoolVerdictRemoved":   {"the bridge's verdict removed by someone else is restored", pool(1, false, 2, verdict("Waiting")), pool(1, false, 2, nil), true},
		"PoolVerdictUnchanged": {"the same verdict is not news", pool(1, false, 2, verdict("Waiting")), pool(1, false, 3, verdict("Waiting")), false},
		"MachineSpec":          {"a Machine's new generation concerns its XR", machine(1, ""), machine(2, ""), true},
		"MachineNodeRef":       {"a Machine's node reference does not", machine(1, ""), machine(1, "node-1"), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ownerChanged(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("%s\nownerChanged(...) = %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}
