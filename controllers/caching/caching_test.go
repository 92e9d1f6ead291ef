package caching

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

func TestStripManagedFields(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "crossplane", Operation: metav1.ManagedFieldsOperationApply}}
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "a", "managedFields": []any{map[string]any{"manager": "crossplane"}}}}}
	typed := &metav1.ObjectMeta{Name: "b", ManagedFields: managed}
	cases := map[string]struct {
		in    any
		check func(t *testing.T, out any)
	}{
		"Unstructured": {in: u, check: func(t *testing.T, out any) {
			t.Helper()
			if got := out.(*unstructured.Unstructured); got.GetManagedFields() != nil || got.GetName() != "a" {
				t.Errorf("managed fields %v, name %q", got.GetManagedFields(), got.GetName())
			}
		}},
		"XR": {in: &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "x", "managedFields": []any{}, "annotations": map[string]any{
				"kubectl.kubernetes.io/last-applied-configuration": `{"spec":{}}`, "crossplane.io/paused": "true"}},
			"spec": map[string]any{"providerID": "p"},
			"status": map[string]any{"ready": true, "conditions": []any{
				map[string]any{"type": "Responsive", "status": "True"},
				map[string]any{"type": "Synced", "status": "True"},
				map[string]any{"type": "Custom", "status": "False"},
				map[string]any{"type": "Ready", "status": "False", "message": "Unready resources: node"},
			}},
		}}, check: func(t *testing.T, out any) {
			t.Helper()
			want := map[string]any{
				"metadata": map[string]any{"name": "x", "annotations": map[string]any{"crossplane.io/paused": "true"}},
				"spec":     map[string]any{"providerID": "p"},
				"status": map[string]any{"ready": true, "conditions": []any{
					map[string]any{"type": "Synced", "status": "True"},
					map[string]any{"type": "Ready", "status": "False", "message": "Unready resources: node"},
				}},
			}
			if diff := cmp.Diff(want, out.(*unstructured.Unstructured).Object); diff != "" {
				t.Errorf("an XR keeps what the bridge reads: -want, +got:\n%s", diff)
			}
		}},
		"Typed": {in: typed, check: func(t *testing.T, out any) {
			t.Helper()
			if got := out.(*metav1.ObjectMeta); got.ManagedFields != nil || got.Name != "b" {
				t.Errorf("managed fields %v, name %q", got.ManagedFields, got.Name)
			}
		}},
		"Other": {in: "tombstone", check: func(t *testing.T, out any) {
			t.Helper()
			if out != "tombstone" {
				t.Errorf("got %v", out)
			}
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := StripManagedFields(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, out)
		})
	}
}

func TestSlimMachine(t *testing.T) {
	verdict := metav1.Condition{Type: infrav1.CrossplaneInfrastructureReadyCondition, Status: metav1.ConditionFalse, Reason: infrav1.InvalidOutputsReason}
	machine := func(conds ...metav1.Condition) *clusterv1.Machine {
		return &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: "m", Generation: 3, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "capi"}}},
			Spec:       clusterv1.MachineSpec{ClusterName: "c", ProviderID: "aws:///i-1"},
			Status: clusterv1.MachineStatus{
				Conditions: conds,
				Addresses:  clusterv1.MachineAddresses{{Type: clusterv1.MachineInternalIP, Address: "10.0.0.1"}},
				Phase:      "Running",
			},
		}
	}
	ready := metav1.Condition{Type: clusterv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready"}
	cases := map[string]struct {
		in   *clusterv1.Machine
		want clusterv1.MachineStatus
	}{
		"KeepsTheVerdict": {in: machine(ready, verdict), want: clusterv1.MachineStatus{Conditions: []metav1.Condition{verdict}}},
		"NoVerdict":       {in: machine(ready), want: clusterv1.MachineStatus{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := slimMachine(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			m := out.(*clusterv1.Machine)
			if diff := cmp.Diff(tc.want, m.Status); diff != "" {
				t.Errorf("status -want +got:\n%s", diff)
			}
			if m.ManagedFields != nil || m.Spec.ProviderID != "aws:///i-1" || m.Generation != 3 {
				t.Errorf("metadata or spec changed: %+v", m.ObjectMeta)
			}
		})
	}
}

func TestInterned(t *testing.T) {
	decode := func() map[string]any {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(`{"apiVersion":"v1","kind":"X","metadata":{"name":"a","labels":{"cluster.x-k8s.io/cluster-name":"demo"}},"status":{"conditions":[{"type":"Ready","status":"True","message":"` + strings.Repeat("m", internMax+1) + `"}]}}`)); err != nil {
			t.Fatal(err)
		}
		return u.Object
	}
	a, b := interned(decode()).(map[string]any), interned(decode()).(map[string]any)
	if diff := cmp.Diff(decode(), a); diff != "" {
		t.Errorf("interned(...) changed the object: -want, +got:\n%s", diff)
	}
	labelKey := func(m map[string]any) string {
		for k := range m["metadata"].(map[string]any)["labels"].(map[string]any) {
			return k
		}
		return ""
	}
	condition := func(m map[string]any, f string) string {
		return m["status"].(map[string]any)["conditions"].([]any)[0].(map[string]any)[f].(string)
	}
	cases := map[string]struct {
		a, b   string
		shared bool
	}{
		"MapKey":     {a: labelKey(a), b: labelKey(b), shared: true},
		"ShortValue": {a: condition(a, "status"), b: condition(b, "status"), shared: true},
		"LongValue":  {a: condition(a, "message"), b: condition(b, "message"), shared: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := unsafe.StringData(tc.a) == unsafe.StringData(tc.b); got != tc.shared {
				t.Errorf("two decodings share %q: %v, want %v", tc.a, got, tc.shared)
			}
		})
	}
}
