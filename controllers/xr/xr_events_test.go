package xr

import (
	stderrors "errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/apply"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/contracts"
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
	unpaused := func(u *unstructured.Unstructured) { u.SetAnnotations(nil) }
	compositionRef := func(u *unstructured.Unstructured) {
		u.SetGeneration(3)
		_ = unstructured.SetNestedField(u.Object, "local", "spec", "crossplane", "compositionRef", "name")
	}
	stalePause := func(u *unstructured.Unstructured) {
		unpaused(u)
		u.SetGeneration(3)
		condition(u, 0, "observedGeneration", int64(3))
		condition(u, 1, "status", "False")
		condition(u, 1, "reason", "ReconcilePaused")
		condition(u, 1, "message", "Reconciliation (including deletion) is paused via the pause annotation")
	}
	cases := map[string]struct {
		// old, when set, changes the old object; mutate changes the new one.
		old    func(u *unstructured.Unstructured)
		mutate func(u *unstructured.Unstructured)
		// cluster makes the XR an InfraCluster's, else a machine's.
		cluster bool
		want    bool
	}{
		"OnlyTheResourceVersion": {mutate: func(u *unstructured.Unstructured) { u.SetResourceVersion("11") }, want: false},
		"OnlyManagedFields": {mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"manager": "crossplane", "time": "2026-11-22T21:01:00Z"}}, "metadata", "managedFields")
		}, want: false},
		"OnlyResponsive":      {mutate: func(u *unstructured.Unstructured) { condition(u, 2, "observedGeneration", int64(3)) }, want: false},
		"OnlyATransitionTime": {mutate: func(u *unstructured.Unstructured) { condition(u, 0, "lastTransitionTime", "2026-11-22T21:02:00Z") }, want: false},
		"Ready":               {mutate: func(u *unstructured.Unstructured) { condition(u, 0, "status", "True") }, want: true},
		"SyncedCatchesUp": {
			old: func(u *unstructured.Unstructured) {
				u.SetGeneration(3)
				condition(u, 0, "status", "True")
				condition(u, 0, "observedGeneration", int64(3))
			},
			mutate: func(u *unstructured.Unstructured) {
				u.SetGeneration(3)
				condition(u, 0, "status", "True")
				condition(u, 0, "observedGeneration", int64(3))
				condition(u, 1, "observedGeneration", int64(3))
			}, want: true,
		},
		"AnOutputBeforeReady": {mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "aws:///i-2", "status", "outputs", "providerID")
		}, want: false},
		"AnOutputOnceReady": {
			old: func(u *unstructured.Unstructured) { condition(u, 0, "status", "True") },
			mutate: func(u *unstructured.Unstructured) {
				condition(u, 0, "status", "True")
				_ = unstructured.SetNestedField(u.Object, "aws:///i-2", "status", "outputs", "providerID")
			}, want: true,
		},
		"AnOutputWithReady": {mutate: func(u *unstructured.Unstructured) {
			condition(u, 0, "status", "True")
			_ = unstructured.SetNestedField(u.Object, "aws:///i-2", "status", "outputs", "providerID")
		}, want: true},
		"AnOutputAsReadyGoes": {
			old: func(u *unstructured.Unstructured) { condition(u, 0, "status", "True") },
			mutate: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "aws:///i-2", "status", "outputs", "providerID")
			}, want: true,
		},
		"TheProvisionedMilestoneOnceReady": {
			old: func(u *unstructured.Unstructured) { condition(u, 0, "status", "True") },
			mutate: func(u *unstructured.Unstructured) {
				condition(u, 0, "status", "True")
				_ = unstructured.SetNestedField(u.Object, true, "status", "initialization", "provisioned")
			}, want: true,
		},
		"ThePause":   {mutate: func(u *unstructured.Unstructured) { u.SetAnnotations(nil) }, want: true},
		"AFinalizer": {mutate: func(u *unstructured.Unstructured) { u.SetFinalizers(nil) }, want: true},
		"AnOwner": {mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"kind": "Machine"}}, "metadata", "ownerReferences")
		}, want: true},
		"TheSpec": {mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "aws:///i-1", "spec", "providerID")
		}, want: true},
		"CrossplanesCompositionReference":     {mutate: compositionRef, want: false},
		"AnInfraClustersCompositionReference": {mutate: compositionRef, cluster: true, want: true},
		"TheResourceReferences": {mutate: func(u *unstructured.Unstructured) {
			u.SetGeneration(3)
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"kind": "Object", "name": "n"}}, "spec", "crossplane", "resourceRefs")
		}, want: true},
		"CrossplanesLabel": {mutate: func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{"crossplane.io/composite": "a"})
		}, want: false},
		"CrossplanesFinalizer": {mutate: func(u *unstructured.Unstructured) {
			u.SetFinalizers([]string{"capxp.dev/bridge", "composite.apiextensions.crossplane.io"})
		}, want: false},
		"CrossplanesFinalizerWhileDeleting": {
			old: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "2026-11-22T21:03:00Z", "metadata", "deletionTimestamp")
				u.SetFinalizers([]string{"capxp.dev/bridge", "composite.apiextensions.crossplane.io"})
			},
			mutate: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "2026-11-22T21:03:00Z", "metadata", "deletionTimestamp")
			}, want: true,
		},
		"ALabel": {mutate: func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{"cluster.x-k8s.io/cluster-name": "c"})
		}, want: true},
		"CrossplanesSwingOfAStalePause": {
			old: func(u *unstructured.Unstructured) {
				stalePause(u)
				condition(u, 1, "status", "True")
				condition(u, 1, "reason", "ReconcileSuccess")
				condition(u, 1, "observedGeneration", int64(3))
			},
			mutate: stalePause, want: false,
		},
		"ReadysMessage": {
			mutate: func(u *unstructured.Unstructured) { condition(u, 0, "message", "Unready resources: node") }, want: true,
		},
		"APauseAcknowledged": {
			mutate: func(u *unstructured.Unstructured) {
				condition(u, 1, "status", "False")
				condition(u, 1, "reason", "ReconcilePaused")
			}, want: true,
		},
		"TheDeletion": {mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "2026-11-22T21:03:00Z", "metadata", "deletionTimestamp")
		}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &xrReconciler{contract: mustContract(infrav1.ContractInfraMachine)}
			if tc.cluster {
				r.contract = mustContract(infrav1.ContractInfraCluster)
			}
			if got := r.xrChanged(event.UpdateEvent{ObjectOld: xr(tc.old), ObjectNew: xr(tc.mutate)}); got != tc.want {
				t.Errorf("xrChanged() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestXRChangedIgnoresReplacedConditions(t *testing.T) {
	xr := func(gen int64, ready, synced map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "a", "uid": "1", "generation": gen},
			"status":   map[string]any{"conditions": []any{ready, synced}},
		}}
	}
	cond := func(t, status, reason, message string, gen int64, at string) map[string]any {
		return map[string]any{"type": t, "status": status, "reason": reason, "message": message, "observedGeneration": gen, "lastTransitionTime": at}
	}
	synced := cond("Synced", "True", "ReconcileSuccess", "", 5, "2026-11-23T23:39:42Z")
	creating := cond("Ready", "False", "Creating", "Unready resources: node", 5, "2026-11-23T23:39:42Z")
	available := cond("Ready", "True", "Available", "", 5, "2026-11-23T23:39:43Z")
	stalePause := cond("Synced", "False", "ReconcilePaused", "Reconciliation (including deletion) is paused via the pause annotation", 1, "2026-11-23T23:39:41Z")
	newGeneration := cond("Ready", "False", "Creating", "Unready resources: node", 6, "2026-11-23T23:39:44Z")

	// One bridge, one XR: each step is an update from the previous object.
	steps := []struct {
		name string
		xr   *unstructured.Unstructured
		want bool
	}{
		{"Composing", xr(5, creating, synced), true},
		{"Ready", xr(5, available, synced), true},
		{"ReadyPutBackToCreating", xr(5, creating, synced), false},
		{"ReadyRestored", xr(5, available, synced), false},
		{"SyncedPutBackToPaused", xr(5, available, stalePause), false},
		{"SyncedRestored", xr(5, available, synced), false},
		{"ANewGeneration", xr(6, newGeneration, synced), true},
		{"TheOldGenerationPutBack", xr(6, available, synced), false},
	}
	r := &xrReconciler{contract: mustContract(infrav1.ContractInfraMachine)}
	prev := xr(5, cond("Ready", "Unknown", "", "", 0, ""), stalePause)
	for _, s := range steps {
		if got := r.xrChanged(event.UpdateEvent{ObjectOld: prev, ObjectNew: s.xr}); got != s.want {
			t.Errorf("%s: xrChanged() = %v, want %v", s.name, got, s.want)
		}
		prev = s.xr
	}
}

// TestXRChangedIgnoresTheBridgesOwnWrite: the update the bridge's own write
// made wakes no one; the same change with someone's write between, or while
// the XR is being deleted, does.
func TestXRChangedIgnoresTheBridgesOwnWrite(t *testing.T) {
	xr := func(rv string, mutate func(u *unstructured.Unstructured)) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "a", "uid": "1", "generation": int64(2), "resourceVersion": rv},
			"spec":     map[string]any{},
		}}
		if mutate != nil {
			mutate(u)
		}
		return u
	}
	providerID := func(u *unstructured.Unstructured) {
		u.SetGeneration(3)
		_ = unstructured.SetNestedField(u.Object, "aws:///i-1", "spec", "providerID")
	}
	deleting := func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "2026-11-22T21:03:00Z", "metadata", "deletionTimestamp")
	}
	cases := map[string]struct {
		old, new *unstructured.Unstructured
		want     bool
	}{
		"TheWrite":                       {old: xr("10", nil), new: xr("11", providerID), want: false},
		"AWriteOfSomeoneElse":            {old: xr("11", nil), new: xr("12", providerID), want: true},
		"TheWriteOverSomeoneElses":       {old: xr("9", nil), new: xr("11", providerID), want: true},
		"TheWriteWhileBeingDeleted":      {old: xr("10", deleting), new: xr("11", func(u *unstructured.Unstructured) { deleting(u); providerID(u) }), want: true},
		"TheSameVersionsOfAnotherObject": {old: xr("10", func(u *unstructured.Unstructured) { u.SetUID("2") }), new: xr("11", func(u *unstructured.Unstructured) { u.SetUID("2"); providerID(u) }), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &xrReconciler{contract: mustContract(infrav1.ContractInfraMachine)}
			// The bridge patched version 10 of XR 1 into version 11.
			r.memory.Record(xr("10", nil), "11", apply.PartPatch, `{"spec":{"providerID":"aws:///i-1"}}`)
			if got := r.xrChanged(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("xrChanged() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestConflicted(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "crossplanemachines"}, "a", stderrors.New("the object has been modified"))
	other := stderrors.New("boom")
	cases := map[string]struct {
		err  error
		want bool
	}{
		"AConflict":                   {err: conflict, want: true},
		"AWrappedConflict":            {err: errors.Wrap(conflict, "cannot patch object"), want: true},
		"TheWritesAggregatedConflict": {err: kerrors.NewAggregate([]error{errors.Wrap(conflict, "cannot patch object")}), want: true},
		"ConflictsOnly":               {err: kerrors.NewAggregate([]error{conflict, errors.Wrap(conflict, "x")}), want: true},
		"AConflictAndAnotherError":    {err: kerrors.NewAggregate([]error{conflict, other}), want: false},
		"AnotherError":                {err: other, want: false},
		"AnAggregateOfAnotherError":   {err: kerrors.NewAggregate([]error{other}), want: false},
		"Nil":                         {err: nil, want: false},
		"NestedAggregatesOfConflicts": {err: kerrors.NewAggregate([]error{kerrors.NewAggregate([]error{conflict}), conflict}), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := conflicted(tc.err); got != tc.want {
				t.Errorf("conflicted(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// mustContract is the Contract of a name, reading nothing.
func mustContract(name string) contracts.Contract {
	c, err := contracts.New(name, contracts.Options{})
	if err != nil {
		panic(err)
	}
	return c
}
