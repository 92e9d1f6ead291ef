package xrd

import (
	"context"
	"slices"
	"strings"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kmeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xcrd"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/xrd"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/apply"
)

// Reconcile adapts one XRD: observe, decide, act.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	o, err := r.observe(ctx, req.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if o.xrd != nil {
		ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("CompositeResourceDefinition", klog.KObj(o.xrd)))
	}
	return r.act(ctx, o, decide(o))
}

// observe reads the XRD and, for one that declares the contract correctly,
// its CRD, the admission kinds served and, once the CRD is ready, what the
// bridge may not do with the kind's XRs.
func (r *Reconciler) observe(ctx context.Context, name string) (observed, error) {
	o := observed{name: name}
	x := &xpextv2.CompositeResourceDefinition{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: name}, x); err != nil {
		return o, errors.Wrap(client.IgnoreNotFound(err), errGetXRD)
	}
	o.xrd = x
	if !hasContractLabel(x) || !x.DeletionTimestamp.IsZero() {
		return o, nil
	}
	// An XRD that declares the contract wrongly is decided on as it is.
	a, _ := xrd.Check(x)
	if a == nil {
		return o, nil
	}
	o.mutatingPolicies = r.serves("MutatingAdmissionPolicy")
	o.validatingPolicies = r.serves("ValidatingAdmissionPolicy")
	crd := &extv1.CustomResourceDefinition{}
	if err := client.IgnoreNotFound(r.apiReader.Get(ctx, types.NamespacedName{Name: x.Name}, crd)); err != nil {
		return o, errors.Wrap(err, errGetCRD)
	}
	o.crdReady = xcrd.IsEstablished(crd.Status) && slices.Contains(strings.Split(crd.Labels[infrav1.CAPIContractLabel], "_"), a.GVK.Version)
	if !o.crdReady {
		return o, nil
	}
	denied, err := r.denied(ctx, x)
	o.denied = denied
	return o, err
}

// serves reports whether the API server serves an admissionregistration.k8s.io/v1 kind.
func (r *Reconciler) serves(kind string) bool {
	_, err := r.client.RESTMapper().RESTMapping(schema.GroupKind{Group: admissionregv1.GroupName, Kind: kind}, admissionregv1.SchemeGroupVersion.Version)
	return err == nil
}

// act does what was decided, in order: the kind's controller stopped, the
// XRD's labels, the admission objects, the XRs let go of, the controller
// run, then the event and the condition that say so.
func (r *Reconciler) act(ctx context.Context, o observed, p plan) (ctrl.Result, error) {
	if p.forget {
		forgetState(o.name)
	}
	if p.stop {
		r.kinds.Stop(o.name)
	}
	x := o.xrd
	if p.labels != nil {
		if err := apply.PatchIfChanged(ctx, r.client, nil, unstructuredXRD(x), func(u *unstructured.Unstructured) { u.SetLabels(p.labels) }); err != nil {
			return ctrl.Result{}, err
		}
	}
	if p.syncAdmission {
		// A policy kind the API server does not serve was observed, and
		// decided on: the condition says what admission does instead.
		if err := r.syncAdmission(ctx); err != nil && !kmeta.IsNoMatchError(errors.Cause(err)) {
			return ctrl.Result{}, err
		}
	}
	if p.release {
		if err := r.release(ctx, x); err != nil {
			return ctrl.Result{}, err
		}
	}
	if p.ensure != nil {
		if err := r.kinds.Ensure(ctx, o.name, *p.ensure); err != nil {
			return ctrl.Result{}, errors.Wrapf(err, "cannot adapt %s", p.ensure.GVK)
		}
	}
	if p.warning != nil {
		r.recorder.Eventf(x, nil, "Warning", p.warning.reason, "Adapt", "%s", p.warning.message)
		ctrl.LoggerFrom(ctx).Info("XRD not adapted as declared", "reason", p.warning.reason, "message", p.warning.message)
	}
	if p.condition != nil {
		if err := r.setCondition(ctx, x, p.condition.Status, p.condition.Reason, p.condition.Message); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: p.requeue}, nil
}
