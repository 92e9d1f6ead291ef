package xrd

import (
	"context"
	"fmt"
	"slices"
	"strings"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xcrd"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/lifecycle"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/xrd"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/access"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/apply"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/webhook"
)

const (
	errGetXRD = "cannot get CompositeResourceDefinition"
	errGetCRD = "cannot get CustomResourceDefinition"
)

// Kinds runs a controller for each adapted XR kind (xr.Controllers).
type Kinds interface {
	// Ensure runs a controller for an adapted XRD, once.
	Ensure(ctx context.Context, name string, a xrd.Adaptation) error
	// Stop stops the controller of an XRD, if one runs.
	Stop(name string)
}

// Reconciler adapts every XRD labelled capxp.dev/contract: it checks the
// XRD, completes its contract label so that Crossplane copies it onto the CRD,
// waits for the CRD, and then runs a controller for the XR kind.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	kinds     Kinds
	recorder  events.EventRecorder
	webhook   *webhook.ClientConfig
}

// NewReconciler returns an Reconciler that runs kind controllers with k.
// With a webhook client config, it also keeps the credentials admission
// webhook registered for every adapted kind.
func NewReconciler(c client.Client, apiReader client.Reader, k Kinds, rec events.EventRecorder, wh *webhook.ClientConfig) *Reconciler {
	return &Reconciler{client: c, apiReader: apiReader, kinds: k, recorder: rec, webhook: wh}
}

// SetupWithManager watches contract XRDs and their CRDs (metadata only).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, o controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("capxp-xrd").
		WithOptions(o).
		For(&xpextv2.CompositeResourceDefinition{}, builder.WithPredicates(contractLabelled())).
		Watches(&extv1.CustomResourceDefinition{},
			handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
			}),
			builder.OnlyMetadata, builder.WithPredicates(contractLabelled())).
		Complete(r)
}

// contractLabelled passes objects that carry, or carried, the contract label.
func contractLabelled() predicate.Funcs {
	has := func(o client.Object) bool { _, ok := o.GetLabels()[infrav1.ContractLabel]; return ok }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return has(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return has(e.ObjectOld) || has(e.ObjectNew) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return has(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return has(e.Object) },
	}
}

// Reconcile adapts one XRD.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	x := &xpextv2.CompositeResourceDefinition{}
	if err := r.client.Get(ctx, req.NamespacedName, x); err != nil {
		if client.IgnoreNotFound(err) == nil {
			adaptation.forget(req.Name)
			r.kinds.Stop(req.Name)
			return ctrl.Result{}, r.syncAdmission(ctx)
		}
		return ctrl.Result{}, errors.Wrap(err, errGetXRD)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("CompositeResourceDefinition", klog.KObj(x))
	ctx = ctrl.LoggerInto(ctx, log)

	if _, ok := x.Labels[infrav1.ContractLabel]; !ok {
		adaptation.forget(x.Name)
		return ctrl.Result{}, r.release(ctx, x)
	}
	if !x.DeletionTimestamp.IsZero() {
		// Crossplane deletes every XR of the kind before the CRD goes: the
		// kind's controller keeps running until then, so that each XR's
		// composed resources are deleted and its finalizer released.
		return ctrl.Result{}, nil
	}

	a, p := xrd.Check(x)
	if p != nil {
		if err := r.release(ctx, x); err != nil {
			return ctrl.Result{}, err
		}
		msg := "Not adapted: " + p.Error()
		if !says(x, p.Reason, msg) {
			r.recorder.Eventf(x, nil, "Warning", p.Reason, "Adapt", "%s", msg)
			log.Info("Cannot adapt XRD", "reason", p.Reason, "problem", p.Error())
		}
		return ctrl.Result{}, r.setCondition(ctx, x, metav1.ConditionFalse, p.Reason, msg)
	}

	// CAPI reads the contract version off the CRD, clusterctl moves the
	// kinds whose CRDs carry its label, and Crossplane copies an XRD's
	// labels onto its CRD: declaring the contract is enough.
	if err := apply.PatchIfChanged(ctx, r.client, nil, unstructuredXRD(x), func(o *unstructured.Unstructured) {
		labels := o.GetLabels()
		labels[infrav1.CAPIContractLabel] = withVersion(labels[infrav1.CAPIContractLabel], a.GVK.Version)
		labels[infrav1.ClusterctlLabel] = ""
		// With clusterctl's provider label beside its own, `clusterctl
		// upgrade` and `clusterctl delete` would delete the XRD, and with it
		// every XR of the kind and what they composed.
		if labels[infrav1.ProviderLabel] == infrav1.ProviderName {
			delete(labels, infrav1.ProviderLabel)
		}
		o.SetLabels(labels)
	}); err != nil {
		return ctrl.Result{}, err
	}

	// New XRs of the kind must be held, and references to credentials the
	// namespace may not use refused, at admission, before the kind's
	// controller runs (and before its CRD exists). Where the API server
	// cannot hold them, the kind is still served, the XRD says what
	// admission does instead (admissionGap), and every XR's credentials
	// are checked as ever.
	unenforced := ""
	if err := r.syncAdmission(ctx); err != nil {
		if !kmeta.IsNoMatchError(errors.Cause(err)) {
			return ctrl.Result{}, err
		}
		unenforced = r.admissionGap(x.Spec.Names.Plural)
	}

	crd := &extv1.CustomResourceDefinition{}
	if err := client.IgnoreNotFound(r.apiReader.Get(ctx, types.NamespacedName{Name: x.Name}, crd)); err != nil {
		return ctrl.Result{}, errors.Wrap(err, errGetCRD)
	}
	if !xcrd.IsEstablished(crd.Status) || !slices.Contains(strings.Split(crd.Labels[infrav1.CAPIContractLabel], "_"), a.GVK.Version) {
		return ctrl.Result{}, r.setCondition(ctx, x, metav1.ConditionFalse, infrav1.WaitingForCRDReason,
			fmt.Sprintf("Waiting for Crossplane to establish CRD %s with label %s including %s", x.Name, infrav1.CAPIContractLabel, a.GVK.Version))
	}
	// A platform team's kind needs the bridge granted it (the aggregated
	// ClusterRole): until then, say so rather than watch and fail. RBAC
	// changes wake nothing here, so look again in a while.
	if missing, err := r.denied(ctx, x); err != nil {
		return ctrl.Result{}, err
	} else if len(missing) > 0 {
		r.kinds.Stop(x.Name)
		msg := fmt.Sprintf("The bridge may not %s: grant it with a ClusterRole labelled %s: \"true\" (`capxp xrd adopt` prints one from the XRD)",
			strings.Join(missing, ", "), xrd.AggregateToBridgeLabel)
		if !says(x, infrav1.ForbiddenReason, msg) {
			r.recorder.Eventf(x, nil, "Warning", infrav1.ForbiddenReason, "Adapt", "%s", msg)
		}
		return ctrl.Result{RequeueAfter: recheckAccessAfter}, r.setCondition(ctx, x, metav1.ConditionFalse, infrav1.ForbiddenReason, msg)
	}
	if err := r.kinds.Ensure(ctx, x.Name, *a); err != nil {
		return ctrl.Result{}, errors.Wrapf(err, "cannot adapt %s", a.GVK)
	}
	if unenforced != "" {
		if !says(x, infrav1.AdmissionUnavailableReason, unenforced) {
			r.recorder.Eventf(x, nil, "Warning", infrav1.AdmissionUnavailableReason, "Adapt", "%s", unenforced)
		}
		return ctrl.Result{}, r.setCondition(ctx, x, metav1.ConditionFalse, infrav1.AdmissionUnavailableReason, unenforced)
	}
	return ctrl.Result{}, r.setCondition(ctx, x, metav1.ConditionTrue, infrav1.ContractAdaptedReason,
		fmt.Sprintf("%s %s is a CAPI %s", a.GVK.Kind, a.GVK.GroupVersion(), a.Contract))
}

// recheckAccessAfter is how often the bridge looks again at a kind it may
// not work with.
const recheckAccessAfter = lifecycle.RecheckAccessAfter

// xrVerbs are what the bridge does with an adapted kind's XRs.
var xrVerbs = []string{"get", "list", "watch", "patch", "patch/status"}

// denied asks the API server which of xrVerbs the bridge may not use on the
// XRD's kind, each as "<verb> <plural>[/status].<group>".
func (r *Reconciler) denied(ctx context.Context, x *xpextv2.CompositeResourceDefinition) ([]string, error) {
	return access.MayNot(ctx, r.client, schema.GroupResource{Group: x.Spec.Group, Resource: x.Spec.Names.Plural}, xrVerbs...)
}

// release stops adapting an XRD that no longer declares the contract, or
// declares it wrongly: its kind's controller stops and the bridge's
// finalizer leaves every XR of the kind, which Crossplane alone handles from
// then on (pause annotations stay as they are).
func (r *Reconciler) release(ctx context.Context, x *xpextv2.CompositeResourceDefinition) error {
	r.kinds.Stop(x.Name)
	if err := r.syncAdmission(ctx); err != nil {
		return err
	}
	if len(x.Spec.Versions) == 0 {
		return nil
	}
	// Every served version lists the same objects: the first will do.
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: x.Spec.Group, Version: x.Spec.Versions[0].Name, Kind: x.Spec.Names.ListKind})
	if list.GetKind() == "" {
		list.SetKind(x.Spec.Names.Kind + "List")
	}
	// Uncached: the kind's informer stopped with its controller.
	if err := r.apiReader.List(ctx, list); err != nil {
		if kmeta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil
		}
		return errors.Wrapf(err, "cannot list %s", x.Spec.Names.Plural)
	}
	for i := range list.Items {
		xr := &list.Items[i]
		if err := client.IgnoreNotFound(apply.PatchIfChanged(ctx, r.client, nil, xr, func(o *unstructured.Unstructured) { controllerutil.RemoveFinalizer(o, infrav1.Finalizer) })); err != nil {
			return err
		}
	}
	return nil
}

// syncAdmission applies the hold and release policies, the move policy, the
// template immutability policy and the credentials webhook for every XRD
// that declares the contract correctly. It reads them from the API every
// time, so that a restarted manager never narrows any before it has seen
// every XRD.
func (r *Reconciler) syncAdmission(ctx context.Context) error {
	list := &xpextv2.CompositeResourceDefinitionList{}
	if err := r.client.List(ctx, list, client.HasLabels{infrav1.ContractLabel}); err != nil {
		return errors.Wrap(err, "cannot list CompositeResourceDefinitions")
	}
	var all, templates []schema.GroupResource
	for i := range list.Items {
		if _, p := xrd.Check(&list.Items[i]); p != nil {
			continue
		}
		all = append(all, groupResource(list.Items[i].Name))
		templates = append(templates, xrd.TemplateResource(&list.Items[i]))
	}
	owners, err := webhook.Owners(ctx, r.client, r.webhook)
	if err != nil {
		return err
	}
	unserved := ensurePolicies(ctx, r.client, r.apiReader, owners, all, templates)
	if unserved != nil && !kmeta.IsNoMatchError(errors.Cause(unserved)) {
		return unserved
	}
	if err := webhook.Ensure(ctx, r.client, r.apiReader, r.webhook, owners, all); err != nil {
		return err
	}
	return unserved
}

// admissionGap says what an API server that serves no admission policy kind
// CAPXP needs does to new XRs of a kind. Without MutatingAdmissionPolicy
// the release policy still refuses every XR created without the hold, so
// nothing composes unchecked; without either, nothing holds them.
func (r *Reconciler) admissionGap(plural string) string {
	vap := schema.GroupKind{Group: admissionregv1.GroupName, Kind: "ValidatingAdmissionPolicy"}
	if _, err := r.client.RESTMapper().RESTMapping(vap, admissionregv1.SchemeGroupVersion.Version); err != nil {
		return fmt.Sprintf("This API server serves neither MutatingAdmissionPolicy nor ValidatingAdmissionPolicy of %s (Kubernetes 1.36 or later): new %s are not held at admission, and Crossplane may compose them before the bridge has checked their credentials and held them",
			admissionregv1.SchemeGroupVersion, plural)
	}
	return fmt.Sprintf("This API server serves no %s MutatingAdmissionPolicy (Kubernetes 1.36 or later), so it cannot hold new %s itself: it admits one only when created with annotation %s: \"true\", which the bridge lifts once its credentials are checked",
		admissionregv1.SchemeGroupVersion, plural, infrav1.CrossplanePausedAnnotation)
}

// ignoreNoMatch is nil for an API the server does not serve.
func ignoreNoMatch(err error) error {
	if kmeta.IsNoMatchError(err) {
		return nil
	}
	return err
}

// groupResource splits an XRD's name, <plural>.<group>.
func groupResource(xrdName string) schema.GroupResource {
	plural, group, _ := strings.Cut(xrdName, ".")
	return schema.GroupResource{Group: group, Resource: plural}
}

func (r *Reconciler) setCondition(ctx context.Context, x *xpextv2.CompositeResourceDefinition, s metav1.ConditionStatus, reason, msg string) error {
	adaptation.set(x.Name, reason)
	u := unstructuredXRD(x)
	st := &apply.StatusApply{}
	st.Condition(u, metav1.Condition{Type: infrav1.ContractAdaptedCondition, Status: s, Reason: reason, Message: msg, ObservedGeneration: x.Generation})
	_, err := st.Apply(ctx, r.client, u)
	return err
}

func unstructuredXRD(x *xpextv2.CompositeResourceDefinition) *unstructured.Unstructured {
	m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(x)
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(xpextv2.CompositeResourceDefinitionGroupVersionKind)
	if u.GetLabels() == nil {
		u.SetLabels(map[string]string{})
	}
	return u
}

// withVersion adds a version to a CAPI contract label value, a list
// separated by underscores.
func withVersion(value, version string) string {
	if value == "" {
		return version
	}
	if slices.Contains(strings.Split(value, "_"), version) {
		return value
	}
	return value + "_" + version
}

// says reports whether the XRD's CAPIContractAdapted condition says reason
// and msg already.
func says(x *xpextv2.CompositeResourceDefinition, reason, msg string) bool {
	c := x.Status.GetCondition(xpv2.ConditionType(infrav1.ContractAdaptedCondition))
	return string(c.Reason) == reason && c.Message == msg
}
