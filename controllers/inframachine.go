package controllers

import (
	"context"

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
	"github.com/capxp/cluster-api-provider-crossplane/bridge/gate"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/outputs"
)

const (
	errGetOwnerMachine = "cannot get the owner Machine"
	errGetCluster      = "cannot get the Machine's Cluster"
)

// InfraMachineReconciler makes one XR kind a CAPI InfraMachine: it keeps each
// XR paused until the gate opens, injects what the composition needs in one
// patch and unpauses it, then maps its outputs onto the contract.
type InfraMachineReconciler struct {
	xrBase
}

// NewInfraMachineReconciler returns a reconciler for XRs of the given kind.
func NewInfraMachineReconciler(c client.Client, gvk schema.GroupVersionKind, rec record.EventRecorder, t *external.ObjectTracker, creds credentials.Resolver) *InfraMachineReconciler {
	return &InfraMachineReconciler{
		xrBase: xrBase{client: c, gvk: gvk, recorder: rec, tracker: t, credentials: creds},
	}
}

// Reconcile maps one machine XR onto the InfraMachine contract, in CAPI's
// order.
func (r *InfraMachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	xr, err := r.get(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := ctrl.LoggerFrom(ctx).WithValues(r.gvk.Kind, klog.KObj(xr))
	ctx = ctrl.LoggerInto(ctx, log)

	if annotations.IsExternallyManaged(xr) {
		log.V(4).Info("Composite resource is externally managed, skipping")
		return ctrl.Result{}, r.removeFinalizer(ctx, xr)
	}
	deleting := !xr.GetDeletionTimestamp().IsZero()

	machine, err := util.GetOwnerMachine(ctx, r.client, metav1.ObjectMeta{Namespace: xr.GetNamespace(), OwnerReferences: xr.GetOwnerReferences()})
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, errors.Wrap(err, errGetOwnerMachine)
	}
	var cluster *clusterv1.Cluster
	if machine != nil {
		cluster, err = util.GetClusterFromMetadata(ctx, r.client, machine.ObjectMeta)
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, errors.Wrap(err, errGetCluster)
		}
	}
	if (machine == nil || cluster == nil) && !deleting {
		// Nothing to compose for yet. The admission policy paused the XR at
		// creation; an XR it did not catch (created before its kind was
		// adapted) is paused here, unless Crossplane composed it already.
		log.V(4).Info("Waiting for the owner Machine and its Cluster")
		if len(xr.GetResourceReferences()) == 0 {
			return ctrl.Result{}, r.patch(ctx, xr, func(o *unstructured.Unstructured) { setPausedAnnotation(o, true) })
		}
		return ctrl.Result{}, nil
	}
	if machine != nil {
		ctx = ctrl.LoggerInto(ctx, log.WithValues("Machine", klog.KObj(machine)))
	}

	if !deleting && !controllerutil.ContainsFinalizer(xr, infrav1.Finalizer) {
		return ctrl.Result{}, r.addFinalizer(ctx, xr)
	}
	if capiPaused(cluster, xr) {
		return ctrl.Result{}, r.reconcilePaused(ctx, cluster, xr)
	}
	if deleting {
		return r.reconcileDelete(ctx, xr, nil)
	}
	return r.reconcileNormal(ctx, cluster, machine, xr)
}

func (r *InfraMachineReconciler) reconcileNormal(ctx context.Context, cluster *clusterv1.Cluster, machine *clusterv1.Machine, xr *composite.Unstructured) (ctrl.Result, error) {
	u := &xr.Unstructured
	status := &statusApply{fields: map[string]any{}}
	status.condition(u, pausedCondition(cluster, xr, false))

	// The cluster's XR holds the failure domains, network and credentials
	// the machine inherits. A read error leaves it nil, and the gate then
	// decides without it (see the closing note of session 2: it should
	// rather wait).
	clusterXR, _ := external.GetObjectFromContractVersionedRef(ctx, r.client, cluster.Spec.InfrastructureRef, cluster.Namespace)
	d := gate.Decide(gate.Inputs{Machine: machine, Cluster: cluster, ClusterXR: clusterXR, XR: u})
	if !d.Open {
		return ctrl.Result{}, r.holdPaused(ctx, machine, xr, status, d.Reason, d.Message)
	}

	// The credentials the machine will compose with: its own, or the
	// cluster's the gate is about to inject.
	ref := providerConfigRef(u)
	if _, inherited := d.Spec["providerConfigRef"]; inherited && ref == nil {
		ref = providerConfigRef(clusterXR)
	}
	cred, result, err := r.checkCredentials(ctx, xr, ref)
	if err != nil {
		return ctrl.Result{}, err
	}
	status.condition(u, cred)
	if cred.Status != metav1.ConditionTrue {
		return result, r.holdPaused(ctx, machine, xr, status, infrav1.CredentialsNotReadyReason, cred.Message)
	}

	var out outputs.Machine
	c := r.contract(xr, func() field.ErrorList {
		var errs field.ErrorList
		out, errs = outputs.MapMachine(u)
		return errs
	})
	status.condition(u, c)
	r.warnOnce(xr, c)
	if setProvisioned(status, u, c) {
		r.recorder.Eventf(xr, "Normal", "Provisioned", "Machine provisioned as %s", out.ProviderID)
	}

	// One patch injects what the composition needs and unpauses the XR, so
	// Crossplane never composes a half-configured machine.
	if len(d.Spec) > 0 {
		r.recorder.Event(xr, "Normal", "Composing", "Cluster infrastructure and bootstrap data are ready; composing the machine")
	}
	if err := r.patch(ctx, xr, func(o *unstructured.Unstructured) {
		for k, v := range d.Spec {
			_ = unstructured.SetNestedField(o.Object, v, "spec", k)
		}
		if c.Status == metav1.ConditionTrue {
			_ = unstructured.SetNestedField(o.Object, out.ProviderID, "spec", "providerID")
		}
		setPausedAnnotation(o, false)
	}); err != nil {
		return ctrl.Result{}, err
	}
	if err := status.apply(ctx, r.client, u); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.mirror(ctx, machine, status)
}
