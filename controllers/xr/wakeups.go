package xr

import (
	"context"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// wakeups counts what wakes an XR kind's reconciler: every request a watch
// event puts in its work queue, by the kind of the object whose event it
// was (the XR's own kind, its CAPI owner's, a composed resource's, a
// credentials config's, a grant's). The queue merges a request already
// waiting, so wake-ups are at least the reconciles they cause.
var wakeups = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "capxp_xr_wakeups_total",
	Help: "Requests to reconcile an XR that watch events queued (before the work queue merges duplicates), by XR kind and the kind of the object whose event it was.",
}, []string{labelKind, "source"})

// counted makes h count the requests it queues for an XR of kind, as
// wake-ups by obj's kind.
func counted(scheme *runtime.Scheme, kind string, obj client.Object, h handler.EventHandler) handler.EventHandler {
	source := obj.GetObjectKind().GroupVersionKind().Kind
	if gvk, err := apiutil.GVKForObject(obj, scheme); err == nil {
		source = gvk.Kind
	}
	n := wakeups.WithLabelValues(kind, source)
	q := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		return countingQueue{TypedRateLimitingInterface: q, n: n}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, w workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(ctx, e, q(w))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, w workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, e, q(w))
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, w workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(ctx, e, q(w))
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, w workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Generic(ctx, e, q(w))
		},
	}
}

// countingQueue counts the requests added to a work queue. The bridge's
// controllers use client-go's queue, not controller-runtime's priority
// queue (controllerOptions), so hiding the latter's interface changes
// nothing.
type countingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	n prometheus.Counter
}

func (q countingQueue) Add(r reconcile.Request) {
	q.n.Inc()
	q.TypedRateLimitingInterface.Add(r)
}

// countingTracker counts the wake-ups of the watches a reconciler starts as
// it learns of kinds (composed kinds, credentials configs).
type countingTracker struct {
	watcher
	scheme *runtime.Scheme
	kind   string
}

func (t countingTracker) Watch(log logr.Logger, obj client.Object, h handler.EventHandler, p ...predicate.Predicate) error {
	return t.watcher.Watch(log, obj, counted(t.scheme, t.kind, obj, h), p...)
}
