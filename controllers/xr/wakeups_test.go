package xr

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestCountedWakeups(t *testing.T) {
	xr := &unstructured.Unstructured{}
	xr.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1alpha1")
	xr.SetKind("CrossplaneMachine")
	xr.SetNamespace("team-a")
	xr.SetName("m-0")
	requests := func(n int) handler.MapFunc {
		return func(context.Context, client.Object) []reconcile.Request {
			out := make([]reconcile.Request, n)
			for i := range out {
				out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: string(rune('a' + i))}}
			}
			return out
		}
	}
	cases := map[string]struct {
		reason string
		kind   string
		obj    client.Object
		h      handler.EventHandler
		events func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request])
		source string
		want   float64
		queued int
	}{
		"XRItself": {
			reason: "An XR's own create and update each queue it, as wake-ups of its own kind; the queue merges them.",
			kind:   "CrossplaneMachineWakeupXR",
			obj:    xr,
			h:      &handler.EnqueueRequestForObject{},
			events: func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				h.Create(context.Background(), event.CreateEvent{Object: xr}, q)
				h.Update(context.Background(), event.UpdateEvent{ObjectOld: xr, ObjectNew: xr}, q)
			},
			source: "CrossplaneMachine",
			want:   2,
			queued: 1,
		},
		"OwnerMapsToMany": {
			reason: "A typed owner's event counts every request its map function queues, by the owner's kind from the scheme.",
			kind:   "CrossplaneMachineWakeupMany",
			obj:    &clusterv1.Cluster{},
			h:      handler.EnqueueRequestsFromMapFunc(requests(3)),
			events: func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				h.Delete(context.Background(), event.DeleteEvent{Object: &clusterv1.Cluster{}}, q)
			},
			source: "Cluster",
			want:   3,
			queued: 3,
		},
		"MapsToNone": {
			reason: "An event that concerns no XR wakes none.",
			kind:   "CrossplaneMachineWakeupNone",
			obj:    &clusterv1.Machine{},
			h:      handler.EnqueueRequestsFromMapFunc(requests(0)),
			events: func(h handler.EventHandler, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				h.Generic(context.Background(), event.GenericEvent{Object: &clusterv1.Machine{}}, q)
			},
			source: "Machine",
			want:   0,
			queued: 0,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			tc.events(counted(testScheme(), tc.kind, tc.obj, tc.h), q)
			got := testutil.ToFloat64(wakeups.WithLabelValues(tc.kind, tc.source))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nwake-ups: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.queued, q.Len()); diff != "" {
				t.Errorf("\n%s\nqueued: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
