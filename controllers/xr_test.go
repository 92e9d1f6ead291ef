package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestXRChanged(t *testing.T) {
	xr := func(mutate func(u *unstructured.Unstructured)) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "a", "generation": int64(2), "resourceVersion": "10",
				"annotations": map[string]any{"crossplane.io/paused": "true"}, "finalizers": []any{"capxp.dev/bridge"},
				"managedFields": []any{map[string]any{"manager": "crossplane", "time": "2026-11-22T21:00:00Z"}}},
			"spec": map[string]any{"parameters": map[string]any{"size": "small"}},
			"status": map[string]any{
				"outputs": map[string]any{"providerID": "aws:///i-1"},
				"conditions": []any{
					map[string]any{"type": "Ready", "status": "False", "reason": "Creating", "observedGeneration": int64(2), "lastTransitionTime": "2026-11-22T21:00:00Z"},
					map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "observedGeneration": int64(2), "lastTransitionTime": "2026-11-22T21:00:00Z"},
					map[string]any{"type": "Responsive", "status": "True", "reason": "WatchCircuitClosed", "observedGeneration": int64(2), "lastTransitionTime": "2026-11-22T21:00:00Z"},
				},
			},
		}}
		if mutate != nil {
			mutate(u)
		}
		return u
	}
	condition := func(u *unstructured.Unstructured, i int, field string, v any) {
		cs, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		cs[i].(map[string]any)[field] = v
		_ = unstructured.SetNestedSlice(u.Object, cs, "status", "conditions")
	}
	cases := map[string]struct {
		mutate func(u *unstructured.Unstructured)
		want   bool
	}{
		"OnlyTheResourceVersion": {mutate: func(u *unstructured.Unstructured) { u.SetResourceVersion("11") }, want: false},
		"OnlyManagedFields": {mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"manager": "crossplane", "time": "2026-11-22T21:01:00Z"}}, "metadata", "managedFields")
		}, want: false},
		"OnlyResponsive":           {mutate: func(u *unstructured.Unstructured) { condition(u, 2, "observedGeneration", int64(3)) }, want: false},
		"OnlyATransitionTime":      {mutate: func(u *unstructured.Unstructured) { condition(u, 0, "lastTransitionTime", "2026-11-22T21:02:00Z") }, want: false},
		"Ready":                    {mutate: func(u *unstructured.Unstructured) { condition(u, 0, "status", "True") }, want: true},
		"SyncedObservedGeneration": {mutate: func(u *unstructured.Unstructured) { condition(u, 1, "observedGeneration", int64(3)) }, want: true},
		"AnOutput": {mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "aws:///i-2", "status", "outputs", "providerID")
		}, want: true},
		"TheProvisionedMilestone": {mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, true, "status", "initialization", "provisioned")
		}, want: true},
		"ThePause":   {mutate: func(u *unstructured.Unstructured) { u.SetAnnotations(nil) }, want: true},
		"AFinalizer": {mutate: func(u *unstructured.Unstructured) { u.SetFinalizers(nil) }, want: true},
		"AnOwner": {mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"kind": "Machine"}}, "metadata", "ownerReferences")
		}, want: true},
		"TheSpec": {mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "aws:///i-1", "spec", "providerID")
		}, want: true},
		"AGeneration": {mutate: func(u *unstructured.Unstructured) { u.SetGeneration(3) }, want: true},
		"ALabel": {mutate: func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{"cluster.x-k8s.io/cluster-name": "c"})
		}, want: true},
		"TheDeletion": {mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "2026-11-22T21:03:00Z", "metadata", "deletionTimestamp")
		}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := xrChanged(event.UpdateEvent{ObjectOld: xr(nil), ObjectNew: xr(tc.mutate)}); got != tc.want {
				t.Errorf("xrChanged() = %v, want %v", got, tc.want)
			}
		})
	}
}
