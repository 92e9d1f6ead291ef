package controllers

import (
	"context"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/outputs"
)

// InfraClusterReconciler makes one XR kind a CAPI InfraCluster.
type InfraClusterReconciler struct {
	xrBase
}

// NewInfraClusterReconciler returns a reconciler for XRs of the given kind.
// The tracker starts watches on composed resource kinds while XRs are being
// deleted.
func NewInfraClusterReconciler(c client.Client, gvk schema.GroupVersionKind, rec record.EventRecorder, t *external.ObjectTracker, creds credentials.Resolver) *InfraClusterReconciler {
	return &InfraClusterReconciler{
		xrBase: xrBase{client: c, gvk: gvk, recorder: rec, tracker: t, credentials: creds},
	}
}

// Reconcile maps one XR onto the InfraCluster contract, in CAPI's order.
func (r *InfraClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	xr, err := r.get(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
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
		ctx = ctrl.LoggerInto(ctx, log.WithValues("Cluster", klog.KObj(cluster)))
	}

	if !deleting && !controllerutil.ContainsFinalizer(xr, infrav1.Finalizer) {
		return ctrl.Result{}, r.addFinalizer(ctx, xr)
	}

	// A paused XR is left as it is, even while being deleted: clusterctl move
	// pauses a cluster and then deletes the source objects, whose composed
	// resources now belong to the target.
	if capiPaused(cluster, xr) {
		return ctrl.Result{}, r.reconcilePaused(ctx, cluster, xr)
	}
	if deleting {
		return r.reconcileDelete(ctx, xr, r.machinesGone(xr))
	}
	return r.reconcileNormal(ctx, cluster, xr)
}

// reconcileNormal maps the endpoint into spec and readiness into status: one
// spec patch and one status apply at most, each only when something differs.
func (r *InfraClusterReconciler) reconcileNormal(ctx context.Context, cluster *clusterv1.Cluster, xr *composite.Unstructured) (ctrl.Result, error) {
	u := &xr.Unstructured
	status := &statusApply{fields: map[string]any{}}
	status.condition(u, pausedCondition(cluster, xr, false))

	cred, result, err := r.checkCredentials(ctx, xr, providerConfigRef(u))
	if err != nil {
		return ctrl.Result{}, err
	}
	status.condition(u, cred)
	if cred.Status != metav1.ConditionTrue {
		return result, r.holdPaused(ctx, cluster, xr, status, infrav1.CredentialsNotReadyReason, cred.Message)
	}

	var out outputs.Cluster
	c := r.contract(xr, func() field.ErrorList {
		var errs field.ErrorList
		out, errs = outputs.MapCluster(u)
		return errs
	})
	status.condition(u, c)
	r.warnOnce(xr, c)

	if setProvisioned(status, u, c) {
		r.recorder.Eventf(xr, "Normal", "Provisioned", "Infrastructure provisioned; control plane endpoint %s:%d", out.Endpoint.Host, out.Endpoint.Port)
	}

	if err := r.patch(ctx, xr, func(o *unstructured.Unstructured) {
		setPausedAnnotation(o, false)
		if c.Status == metav1.ConditionTrue {
			_ = unstructured.SetNestedMap(o.Object, map[string]any{"host": out.Endpoint.Host, "port": int64(out.Endpoint.Port)}, "spec", "controlPlaneEndpoint")
		}
	}); err != nil {
		return ctrl.Result{}, err
	}
	if err := status.apply(ctx, r.client, u); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.mirror(ctx, cluster, status)
}

// machinesGone holds a cluster XR's deletion while Machines of its cluster
// exist: each Machine waits for its machine XR, so networking never goes
// before the machines that use it.
func (r *InfraClusterReconciler) machinesGone(xr *composite.Unstructured) func(context.Context) (string, string, error) {
	return func(ctx context.Context) (string, string, error) {
		name := xr.GetLabels()[clusterv1.ClusterNameLabel]
		if name == "" {
			return "", "", nil
		}
		machines := &clusterv1.MachineList{}
		if err := r.client.List(ctx, machines, client.InNamespace(xr.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
			return "", "", errors.Wrap(err, "cannot list the cluster's Machines")
		}
		if len(machines.Items) == 0 {
			return "", "", nil
		}
		names := make([]string, 0, len(machines.Items))
		for _, m := range machines.Items {
			names = append(names, m.Name)
		}
		sort.Strings(names)
		return infrav1.WaitingForMachinesReason, fmt.Sprintf("Waiting for %d Machines of Cluster %s to be deleted: %s", len(names), name, firstN(names, 5)), nil
	}
}
