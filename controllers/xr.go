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
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/cluster-api/util/annotations"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/readiness"
)

const (
	errGetXR           = "cannot get composite resource"
	errGetOwnerCluster = "cannot get the owner Cluster"
	errGetComposed     = "cannot get composed resource"
	errDeleteComposed  = "cannot delete composed resource"
	errWatchComposed   = "cannot watch composed resources"
)

// xrBase is what the InfraCluster and InfraMachine reconcilers share: one XR
// kind, and the finalizer, pause, deletion and condition mirroring every
// adapted XR gets.
type xrBase struct {
	client      client.Client
	gvk         schema.GroupVersionKind
	recorder    record.EventRecorder
	tracker     *external.ObjectTracker
	credentials credentials.Resolver
}

func (b *xrBase) get(ctx context.Context, key types.NamespacedName) (*composite.Unstructured, error) {
	xr := composite.New(composite.WithGroupVersionKind(b.gvk))
	if err := b.client.Get(ctx, key, &xr.Unstructured); err != nil {
		return nil, errors.Wrap(err, errGetXR)
	}
	return xr, nil
}

// patch applies mutate to a copy of the XR and sends the difference as a
// merge patch guarded by the resource version, so that a concurrent change
// (Crossplane adding its finalizer, say) is never overwritten. It sends
// nothing when mutate changes nothing.
func (b *xrBase) patch(ctx context.Context, xr *composite.Unstructured, mutate func(*unstructured.Unstructured)) error {
	return patchIfChanged(ctx, b.client, &xr.Unstructured, mutate)
}

func (b *xrBase) addFinalizer(ctx context.Context, xr *composite.Unstructured) error {
	return b.patch(ctx, xr, func(o *unstructured.Unstructured) { controllerutil.AddFinalizer(o, infrav1.Finalizer) })
}

func (b *xrBase) removeFinalizer(ctx context.Context, xr *composite.Unstructured) error {
	if !controllerutil.ContainsFinalizer(xr, infrav1.Finalizer) {
		return nil
	}
	return b.patch(ctx, xr, func(o *unstructured.Unstructured) { controllerutil.RemoveFinalizer(o, infrav1.Finalizer) })
}

// reconcilePaused carries CAPI's pause to Crossplane and says so.
func (b *xrBase) reconcilePaused(ctx context.Context, cluster *clusterv1.Cluster, xr *composite.Unstructured) error {
	if err := b.patch(ctx, xr, func(o *unstructured.Unstructured) { setPausedAnnotation(o, true) }); err != nil {
		return err
	}
	status := &statusApply{}
	status.condition(&xr.Unstructured, pausedCondition(cluster, xr, true))
	return status.apply(ctx, b.client, &xr.Unstructured)
}

// providerConfigRef reads an XR's spec.providerConfigRef; nil when unset.
func providerConfigRef(u *unstructured.Unstructured) *infrav1.ProviderConfigReference {
	ref := &infrav1.ProviderConfigReference{}
	if err := fieldpath.Pave(u.Object).GetValueInto("spec.providerConfigRef", ref); err != nil || ref.Name == "" {
		return nil
	}
	return ref
}

// checkCredentials resolves the credentials an XR uses into its
// CredentialsReady condition, and watches the referenced config's kind so
// that its creation or change wakes the XR. A missing Secret is looked for
// again after a while: the bridge does not watch Secrets.
func (b *xrBase) checkCredentials(ctx context.Context, xr *composite.Unstructured, ref *infrav1.ProviderConfigReference) (metav1.Condition, ctrl.Result, error) {
	c := metav1.Condition{Type: infrav1.CredentialsReadyCondition, ObservedGeneration: xr.GetGeneration()}
	if ref != nil {
		if err := b.watchConfig(ctx, ref); err != nil {
			return c, ctrl.Result{}, err
		}
	}
	res, err := b.credentials.Resolve(ctx, xr.GetNamespace(), ref)
	if err != nil {
		return c, ctrl.Result{}, errors.Wrap(err, "cannot resolve credentials")
	}
	c.Status, c.Reason, c.Message = metav1.ConditionFalse, res.Reason, res.Message
	if res.Ready {
		c.Status = metav1.ConditionTrue
	}
	var result ctrl.Result
	if res.Reason == infrav1.CredentialsSecretNotFoundReason {
		result.RequeueAfter = credentials.RecheckSecretAfter
	}
	return c, result, nil
}

// watchConfig watches (metadata only) the kind of a referenced credentials
// config, mapping each config to the XRs of this kind that name it.
func (b *xrBase) watchConfig(ctx context.Context, ref *infrav1.ProviderConfigReference) error {
	m, err := b.client.RESTMapper().RESTMapping(schema.GroupKind{Group: ref.APIGroup, Kind: string(ref.Kind)})
	if err != nil {
		// Reported by the resolver; nothing to watch yet.
		return nil //nolint:nilerr // the resolver reports a missing kind as a condition.
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(m.GroupVersionKind)
	kind := ref.Kind
	return errors.Wrap(b.tracker.Watch(ctrl.LoggerFrom(ctx), obj, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return b.referencing(ctx, o.GetNamespace(), func(r *infrav1.ProviderConfigReference) bool {
			return r.APIGroup == m.GroupVersionKind.Group && r.Kind == kind && r.Name == o.GetName()
		})
	})), "cannot watch credentials configs")
}

// referencing lists the XRs of this kind, in a namespace or all, whose
// providerConfigRef matches.
func (b *xrBase) referencing(ctx context.Context, namespace string, match func(*infrav1.ProviderConfigReference) bool) []reconcile.Request {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(b.gvk.GroupVersion().WithKind(b.gvk.Kind + "List"))
	if err := b.client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if ref := providerConfigRef(&list.Items[i]); ref != nil && match(ref) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// holdPaused keeps an XR paused in Crossplane, so that nothing new is
// composed (a closed machine gate, credentials that may not be used), and
// says why in ContractReady on the XR and its CAPI owner.
func (b *xrBase) holdPaused(ctx context.Context, owner client.Object, xr *composite.Unstructured, status *statusApply, reason, msg string) error {
	status.condition(&xr.Unstructured, metav1.Condition{Type: infrav1.ContractReadyCondition, Status: metav1.ConditionFalse,
		Reason: reason, Message: msg, ObservedGeneration: xr.GetGeneration()})
	if err := b.patch(ctx, xr, func(o *unstructured.Unstructured) { setPausedAnnotation(o, true) }); err != nil {
		return err
	}
	if err := status.apply(ctx, b.client, &xr.Unstructured); err != nil {
		return err
	}
	return b.mirror(ctx, owner, status)
}

// capiPaused reports whether CAPI pauses the XR.
func capiPaused(cluster *clusterv1.Cluster, xr metav1.Object) bool {
	return annotations.HasPaused(xr) || cluster != nil && annotations.IsPaused(cluster, xr)
}

// reconcileDelete deletes every resource the XR composed and holds the XR
// until they are gone: Crossplane v2 leaves them to the garbage collector,
// which would only act once the XR is gone. wait, when set, is checked first:
// it names what else must be gone before the XR's own resources go.
func (b *xrBase) reconcileDelete(ctx context.Context, xr *composite.Unstructured, wait func(context.Context) (string, string, error)) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(xr, infrav1.Finalizer) {
		return ctrl.Result{}, nil
	}
	deleting := func(reason, msg string) (ctrl.Result, error) {
		status := &statusApply{}
		status.condition(&xr.Unstructured, metav1.Condition{
			Type: infrav1.DeletingCondition, Status: metav1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: xr.GetGeneration(),
		})
		return ctrl.Result{}, status.apply(ctx, b.client, &xr.Unstructured)
	}
	if wait != nil {
		reason, msg, err := wait(ctx)
		if err != nil {
			return ctrl.Result{}, err
		}
		if msg != "" {
			return deleting(reason, msg)
		}
	}
	remaining, err := b.deleteComposed(ctx, xr)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(remaining) > 0 {
		return deleting(infrav1.DeletingReason, fmt.Sprintf("Waiting for %d composed resources to be deleted: %s", len(remaining), firstN(remaining, 5)))
	}
	ctrl.LoggerFrom(ctx).Info("Every composed resource is gone; releasing the composite resource")
	return ctrl.Result{}, b.removeFinalizer(ctx, xr)
}

// deleteComposed deletes the XR's composed resources and returns those that
// still exist. It watches their kinds (metadata only) so that their
// disappearance wakes the bridge; nothing polls.
func (b *xrBase) deleteComposed(ctx context.Context, xr *composite.Unstructured) ([]string, error) {
	log := ctrl.LoggerFrom(ctx)
	owner := &unstructured.Unstructured{}
	owner.SetGroupVersionKind(b.gvk)
	var remaining []string
	for _, ref := range xr.GetResourceReferences() {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
		if err := b.tracker.Watch(log, obj, handler.EnqueueRequestForOwner(b.client.Scheme(), b.client.RESTMapper(), owner, handler.OnlyControllerOwner())); err != nil {
			return nil, errors.Wrap(err, errWatchComposed)
		}
		ns := ref.Namespace
		if ns == "" {
			ns = xr.GetNamespace()
		}
		if err := b.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, errors.Wrapf(err, "%s %s %s", errGetComposed, ref.Kind, ref.Name)
		}
		remaining = append(remaining, ref.Kind+"/"+ref.Name)
		if obj.GetDeletionTimestamp().IsZero() {
			log.Info("Deleting composed resource", "kind", ref.Kind, "name", ref.Name)
			if err := b.client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return nil, errors.Wrapf(err, "%s %s %s", errDeleteComposed, ref.Kind, ref.Name)
			}
		}
	}
	sort.Strings(remaining)
	return remaining, nil
}

// contract computes the ContractReady condition from Crossplane's view and
// the outputs' field errors.
func (b *xrBase) contract(xr *composite.Unstructured, mapOutputs func() field.ErrorList) metav1.Condition {
	c := metav1.Condition{Type: infrav1.ContractReadyCondition, ObservedGeneration: xr.GetGeneration()}
	obs := readiness.Observe(xr)
	if !obs.Ready {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, obs.Reason, obs.Message
		return c
	}
	if errs := mapOutputs(); len(errs) > 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, outputsReason(errs), errs.ToAggregate().Error()
		return c
	}
	c.Status, c.Reason = metav1.ConditionTrue, infrav1.ContractReadyReason
	return c
}

// mirror copies the XR's ContractReady condition onto the CAPI object that
// owns it as CrossplaneInfrastructureReady, the one condition type the bridge
// writes on CAPI's objects.
func (b *xrBase) mirror(ctx context.Context, owner client.Object, s *statusApply) error {
	for _, c := range s.conditions {
		if c.Type != infrav1.ContractReadyCondition {
			continue
		}
		c.Type = infrav1.CrossplaneInfrastructureReadyCondition
		c.ObservedGeneration = owner.GetGeneration()
		u, err := toUnstructured(b.client, owner)
		if err != nil {
			return err
		}
		m := &statusApply{}
		m.condition(u, c)
		return m.apply(ctx, b.client, u)
	}
	return nil
}

// warnOnce records a Warning event when an XR's condition turns to a bad
// outputs reason, not on every reconcile.
func (b *xrBase) warnOnce(xr *composite.Unstructured, c metav1.Condition) {
	if c.Reason == infrav1.InvalidOutputsReason && !sameCondition(&xr.Unstructured, c) {
		b.recorder.Event(xr, "Warning", c.Reason, c.Message)
	}
}

// listByCluster maps a Cluster to the XRs of a kind labelled with its name.
func listByCluster(c client.Client, gvk schema.GroupVersionKind) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, xr := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&xr)})
		}
		return reqs
	}
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

// setProvisioned records the provisioned milestone (CAPI's v1beta2 field and
// the v1beta1 one it still reads) and reports whether it is reached now for
// the first time. Once reached it stays, whatever the contract says later.
func setProvisioned(status *statusApply, u *unstructured.Unstructured, c metav1.Condition) (first bool) {
	was := isProvisioned(u)
	provisioned := c.Status == metav1.ConditionTrue || was
	status.fields["status.initialization.provisioned"] = provisioned
	status.fields["status.ready"] = provisioned
	return provisioned && !was
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
