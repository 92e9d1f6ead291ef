package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/outputs"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/readiness"
)

const (
	errGetXR           = "cannot get composite resource"
	errGetOwnerCluster = "cannot get the owner Cluster"
	errGetComposed     = "cannot get composed resource"
	errDeleteComposed  = "cannot delete composed resource"
	errWatchComposed   = "cannot watch composed resources"
)

// InfraClusterReconciler makes one XR kind a CAPI InfraCluster.
type InfraClusterReconciler struct {
	client   client.Client
	gvk      schema.GroupVersionKind
	recorder record.EventRecorder
	tracker  *external.ObjectTracker

	outputs   outputs.ClusterMapper
	readiness readiness.Observer
}

// An InfraClusterOption configures an InfraClusterReconciler.
type InfraClusterOption func(*InfraClusterReconciler)

// WithClusterOutputs replaces the output mapper.
func WithClusterOutputs(m outputs.ClusterMapper) InfraClusterOption {
	return func(r *InfraClusterReconciler) { r.outputs = m }
}

// WithReadiness replaces the readiness observer.
func WithReadiness(o readiness.Observer) InfraClusterOption {
	return func(r *InfraClusterReconciler) { r.readiness = o }
}

// NewInfraClusterReconciler returns a reconciler for XRs of the given kind.
// The tracker starts watches on composed resource kinds while XRs are being
// deleted.
func NewInfraClusterReconciler(c client.Client, gvk schema.GroupVersionKind, rec record.EventRecorder, t *external.ObjectTracker, opts ...InfraClusterOption) *InfraClusterReconciler {
	r := &InfraClusterReconciler{
		client:    c,
		gvk:       gvk,
		recorder:  rec,
		tracker:   t,
		outputs:   outputs.ClusterMapperFn(outputs.MapCluster),
		readiness: readiness.ObserverFn(readiness.Observe),
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Reconcile maps one XR onto the InfraCluster contract, in CAPI's order.
func (r *InfraClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	xr := composite.New(composite.WithGroupVersionKind(r.gvk))
	if err := r.client.Get(ctx, req.NamespacedName, &xr.Unstructured); err != nil {
		return ctrl.Result{}, errors.Wrap(client.IgnoreNotFound(err), errGetXR)
	}
	log := ctrl.LoggerFrom(ctx).WithValues(r.gvk.Kind, klog.KObj(xr))
	ctx = ctrl.LoggerInto(ctx, log)

	// Externally managed infrastructure is none of the bridge's business; it
	// only lets go of an XR it held before the annotation was added.
	if annotations.IsExternallyManaged(xr) {
		log.V(4).Info("Composite resource is externally managed, skipping")
		return ctrl.Result{}, r.removeFinalizer(ctx, xr)
	}

	cluster, err := util.GetOwnerCluster(ctx, r.client, metav1.ObjectMeta{Namespace: xr.GetNamespace(), OwnerReferences: xr.GetOwnerReferences()})
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, errors.Wrap(err, errGetOwnerCluster)
	}
	deleting := !xr.GetDeletionTimestamp().IsZero()
	if cluster == nil && !deleting {
		log.V(4).Info("Waiting for CAPI to set the owner Cluster")
		return ctrl.Result{}, nil
	}
	if cluster != nil {
		log = log.WithValues("Cluster", klog.KObj(cluster))
		ctx = ctrl.LoggerInto(ctx, log)
	}

	if !deleting && !controllerutil.ContainsFinalizer(xr, infrav1.Finalizer) {
		return ctrl.Result{}, r.patch(ctx, xr, func(o *unstructured.Unstructured) { controllerutil.AddFinalizer(o, infrav1.Finalizer) })
	}

	// A paused XR is left as it is, even while being deleted: clusterctl move
	// pauses a cluster and then deletes the source objects, whose composed
	// resources now belong to the target.
	if annotations.HasPaused(xr) || cluster != nil && annotations.IsPaused(cluster, xr) {
		return ctrl.Result{}, r.reconcilePaused(ctx, cluster, xr)
	}
	if deleting {
		return r.reconcileDelete(ctx, xr)
	}
	return ctrl.Result{}, r.reconcileNormal(ctx, cluster, xr)
}

// reconcilePaused carries CAPI's pause to Crossplane and says so.
func (r *InfraClusterReconciler) reconcilePaused(ctx context.Context, cluster *clusterv1.Cluster, xr *composite.Unstructured) error {
	if err := r.patch(ctx, xr, func(o *unstructured.Unstructured) { setPausedAnnotation(o, true) }); err != nil {
		return err
	}
	status := &statusApply{}
	status.condition(&xr.Unstructured, pausedCondition(cluster, xr, true))
	_, err := status.apply(ctx, r.client, &xr.Unstructured)
	return err
}

// reconcileNormal carries pause to Crossplane, maps the endpoint into spec
// and readiness into status: one spec patch and one status apply at most, each
// only when something differs.
func (r *InfraClusterReconciler) reconcileNormal(ctx context.Context, cluster *clusterv1.Cluster, xr *composite.Unstructured) error {
	u := &xr.Unstructured
	status := &statusApply{fields: map[string]any{}}
	status.condition(u, pausedCondition(cluster, xr, false))

	c, obs := r.observe(xr)
	status.condition(u, c)
	var endpoint *infrav1.APIEndpoint
	if c.Status == metav1.ConditionTrue {
		endpoint = &obs.Endpoint
	}
	// provisioned is a one-time milestone: once reached, it stays.
	provisioned := c.Status == metav1.ConditionTrue || isProvisioned(u)
	status.fields["status.initialization.provisioned"] = provisioned
	status.fields["status.ready"] = provisioned
	if provisioned && !isProvisioned(u) {
		r.recorder.Eventf(xr, "Normal", "Provisioned", "Infrastructure provisioned; control plane endpoint %s:%d", obs.Endpoint.Host, obs.Endpoint.Port)
	}
	if c.Reason == infrav1.InvalidOutputsReason && !sameCondition(u, c) {
		r.recorder.Event(xr, "Warning", c.Reason, c.Message)
	}

	if err := r.patch(ctx, xr, func(o *unstructured.Unstructured) {
		setPausedAnnotation(o, false)
		if endpoint != nil {
			_ = unstructured.SetNestedMap(o.Object, map[string]any{"host": endpoint.Host, "port": int64(endpoint.Port)}, "spec", "controlPlaneEndpoint")
		}
	}); err != nil {
		return err
	}
	if _, err := status.apply(ctx, r.client, u); err != nil {
		return err
	}
	return r.mirrorToCluster(ctx, cluster, status)
}

// observe computes the ContractReady condition: Crossplane's view first, then
// the contract outputs.
func (r *InfraClusterReconciler) observe(xr *composite.Unstructured) (metav1.Condition, outputs.Cluster) {
	c := metav1.Condition{Type: infrav1.ContractReadyCondition, ObservedGeneration: xr.GetGeneration()}
	obs := r.readiness.Observe(xr)
	if !obs.Ready {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, obs.Reason, obs.Message
		return c, outputs.Cluster{}
	}
	out, errs := r.outputs.MapCluster(&xr.Unstructured)
	if len(errs) > 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, outputsReason(errs), errs.ToAggregate().Error()
		return c, outputs.Cluster{}
	}
	c.Status, c.Reason = metav1.ConditionTrue, infrav1.ContractReadyReason
	return c, out
}

// mirrorToCluster copies the XR's ContractReady condition to the CAPI Cluster
// as CrossplaneInfrastructureReady, the one condition type the bridge writes
// on CAPI's objects.
func (r *InfraClusterReconciler) mirrorToCluster(ctx context.Context, cluster *clusterv1.Cluster, s *statusApply) error {
	for _, c := range s.conditions {
		if c.Type != infrav1.ContractReadyCondition {
			continue
		}
		c.Type = infrav1.CrossplaneInfrastructureReadyCondition
		c.ObservedGeneration = cluster.GetGeneration()
		u, err := toUnstructured(r.client, cluster)
		if err != nil {
			return err
		}
		mirror := &statusApply{}
		mirror.condition(u, c)
		_, err = mirror.apply(ctx, r.client, u)
		return err
	}
	return nil
}

// reconcileDelete deletes every resource the XR composed and holds the XR
// until they are gone: Crossplane v2 leaves them to the garbage collector,
// which would only act once the XR is gone.
func (r *InfraClusterReconciler) reconcileDelete(ctx context.Context, xr *composite.Unstructured) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(xr, infrav1.Finalizer) {
		return ctrl.Result{}, nil
	}
	remaining, err := r.deleteComposed(ctx, xr)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(remaining) > 0 {
		status := &statusApply{}
		status.condition(&xr.Unstructured, metav1.Condition{
			Type: infrav1.DeletingCondition, Status: metav1.ConditionTrue, Reason: infrav1.DeletingReason,
			ObservedGeneration: xr.GetGeneration(),
			Message:            fmt.Sprintf("Waiting for %d composed resources to be deleted: %s", len(remaining), firstN(remaining, 5)),
		})
		_, err := status.apply(ctx, r.client, &xr.Unstructured)
		return ctrl.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("Every composed resource is gone; releasing the composite resource")
	return ctrl.Result{}, r.removeFinalizer(ctx, xr)
}

// deleteComposed deletes the XR's composed resources and returns those that
// still exist. It watches their kinds so that their disappearance wakes the
// bridge; nothing polls.
func (r *InfraClusterReconciler) deleteComposed(ctx context.Context, xr *composite.Unstructured) ([]string, error) {
	log := ctrl.LoggerFrom(ctx)
	owner := &unstructured.Unstructured{}
	owner.SetGroupVersionKind(r.gvk)
	var remaining []string
	for _, ref := range xr.GetResourceReferences() {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
		if err := r.tracker.Watch(log, obj, handler.EnqueueRequestForOwner(r.client.Scheme(), r.client.RESTMapper(), owner, handler.OnlyControllerOwner())); err != nil {
			return nil, errors.Wrap(err, errWatchComposed)
		}
		ns := ref.Namespace
		if ns == "" {
			ns = xr.GetNamespace()
		}
		if err := r.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, errors.Wrapf(err, "%s %s %s", errGetComposed, ref.Kind, ref.Name)
		}
		remaining = append(remaining, ref.Kind+"/"+ref.Name)
		if obj.GetDeletionTimestamp().IsZero() {
			log.Info("Deleting composed resource", "kind", ref.Kind, "name", ref.Name)
			if err := r.client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return nil, errors.Wrapf(err, "%s %s %s", errDeleteComposed, ref.Kind, ref.Name)
			}
		}
	}
	sort.Strings(remaining)
	return remaining, nil
}

func (r *InfraClusterReconciler) removeFinalizer(ctx context.Context, xr *composite.Unstructured) error {
	if !controllerutil.ContainsFinalizer(xr, infrav1.Finalizer) {
		return nil
	}
	return r.patch(ctx, xr, func(o *unstructured.Unstructured) { controllerutil.RemoveFinalizer(o, infrav1.Finalizer) })
}

// patch applies mutate to a copy of the XR and sends the difference as a
// merge patch, guarded by the resource version so that a concurrent change
// (Crossplane adding its finalizer, say) is never overwritten. It sends
// nothing when mutate changes nothing.
func (r *InfraClusterReconciler) patch(ctx context.Context, xr *composite.Unstructured, mutate func(*unstructured.Unstructured)) error {
	return patchIfChanged(ctx, r.client, &xr.Unstructured, mutate)
}

func pausedCondition(cluster *clusterv1.Cluster, xr metav1.Object, paused bool) metav1.Condition {
	c := metav1.Condition{Type: infrav1.PausedCondition, Status: metav1.ConditionFalse, Reason: infrav1.NotPausedReason, ObservedGeneration: xr.GetGeneration()}
	if !paused {
		return c
	}
	c.Status, c.Reason = metav1.ConditionTrue, infrav1.PausedReason
	var why []string
	if cluster != nil && ptr.Deref(cluster.Spec.Paused, false) {
		why = append(why, "Cluster spec.paused is true")
	}
	if cluster != nil && annotations.HasPaused(cluster) {
		why = append(why, "Cluster has the "+clusterv1.PausedAnnotation+" annotation")
	}
	if annotations.HasPaused(xr) {
		why = append(why, "the composite resource has the "+clusterv1.PausedAnnotation+" annotation")
	}
	c.Message = strings.Join(why, "; ") + "; Crossplane is paused with " + infrav1.CrossplanePausedAnnotation
	return c
}

func setPausedAnnotation(o *unstructured.Unstructured, paused bool) {
	a := o.GetAnnotations()
	if paused {
		if a == nil {
			a = map[string]string{}
		}
		a[infrav1.CrossplanePausedAnnotation] = "true"
	} else {
		delete(a, infrav1.CrossplanePausedAnnotation)
	}
	o.SetAnnotations(a)
}

func isProvisioned(u *unstructured.Unstructured) bool {
	p, _, _ := unstructured.NestedBool(u.Object, "status", "initialization", "provisioned")
	return p
}

func sameCondition(u *unstructured.Unstructured, c metav1.Condition) bool {
	old, ok := findCondition(u, c.Type)
	return ok && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message
}

// outputsReason tells a missing output (a whole status.outputs.<name> absent)
// from a malformed one.
func outputsReason(errs field.ErrorList) string {
	for _, e := range errs {
		whole := strings.HasPrefix(e.Field, "status.outputs.") && strings.Count(e.Field, ".") == 2
		if e.Type != field.ErrorTypeRequired || !whole {
			return infrav1.InvalidOutputsReason
		}
	}
	return infrav1.MissingOutputsReason
}

func firstN(s []string, n int) string {
	if len(s) <= n {
		return strings.Join(s, ", ")
	}
	return strings.Join(s[:n], ", ") + fmt.Sprintf(" and %d more", len(s)-n)
}
