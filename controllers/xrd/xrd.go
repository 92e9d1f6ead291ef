package xrd

import (
	"context"
	"strings"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
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

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
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

// xrVerbs are what the bridge does with an adapted kind's XRs.
var xrVerbs = []string{"get", "list", "watch", "patch", "patch/status"}

// denied asks the API server which of xrVerbs the bridge may not use on the
// XRD's kind, each as "<verb> <plural>[/status].<group>".
func (r *Reconciler) denied(ctx context.Context, x *xpextv2.CompositeResourceDefinition) ([]string, error) {
	return access.MayNot(ctx, r.client, schema.GroupResource{Group: x.Spec.Group, Resource: x.Spec.Names.Plural}, xrVerbs...)
}

// release lets go of every XR of a kind the bridge no longer adapts (the
// XRD no longer declares the contract, or declares it wrongly; its
// controller stopped): the bridge's finalizer leaves each, and Crossplane
// alone handles them from then on (pause annotations stay as they are).
func (r *Reconciler) release(ctx context.Context, x *xpextv2.CompositeResourceDefinition) error {
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
// template immutability and machine parameters policies and the credentials webhook for every XRD
// that declares the contract correctly. It reads them from the API every
// time, so that a restarted manager never narrows any before it has seen
// every XRD.
func (r *Reconciler) syncAdmission(ctx context.Context) error {
	list := &xpextv2.CompositeResourceDefinitionList{}
	if err := r.client.List(ctx, list, client.HasLabels{infrav1.ContractLabel}); err != nil {
		return errors.Wrap(err, "cannot list CompositeResourceDefinitions")
	}
	var all, templates, machines []schema.GroupResource
	for i := range list.Items {
		if _, p := xrd.Check(&list.Items[i]); p != nil {
			continue
		}
		all = append(all, groupResource(list.Items[i].Name))
		templates = append(templates, xrd.TemplateResource(&list.Items[i]))
		if list.Items[i].Labels[infrav1.ContractLabel] == infrav1.ContractInfraMachine {
			machines = append(machines, groupResource(list.Items[i].Name))
		}
	}
	owners, err := webhook.Owners(ctx, r.client, r.webhook)
	if err != nil {
		return err
	}
	unserved := ensurePolicies(ctx, r.client, r.apiReader, owners, all, templates, machines)
	if unserved != nil && !kmeta.IsNoMatchError(errors.Cause(unserved)) {
		return unserved
	}
	if err := webhook.Ensure(ctx, r.client, r.apiReader, r.webhook, owners, all); err != nil {
		return err
	}
	return unserved
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
	setState(x.Name, reason)
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
