package xr

// Credentials an XR composes with: checked every reconcile, their kinds
// watched, and the reads of their Secrets shared fairly between namespaces.

import (
	"context"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/budget"
)

// checkCredentials resolves the credentials an XR composes with; a verdict
// to hold it paused with when they may not be used, when to look again
// without an event, and why they were refused ("" when they may be used).
// It watches the
// referenced config's kind so that its creation or change wakes the XR. A
// missing Secret is looked for again after a while: the bridge does not
// watch Secrets.
func (r *xrReconciler) checkCredentials(ctx context.Context, xr *composite.Unstructured) (*verdict.Verdict, time.Duration, *string, error) {
	ref := credentials.ReferenceOf(xr.Object)
	if ref != nil {
		if err := r.watchConfig(ctx, ref); err != nil {
			return nil, 0, nil, err
		}
	}
	res, err := r.credentials.Resolve(budget.WithReadFor(ctx, xr.GetNamespace()), xr.GetNamespace(), ref)
	if err != nil {
		return nil, 0, nil, errors.Wrap(err, errResolveCreds)
	}
	if res.Ready {
		return nil, 0, new(string), nil
	}
	var again time.Duration
	if res.Reason == infrav1.CredentialsSecretNotFoundReason {
		again = credentials.RecheckSecretAfter
	}
	return &verdict.Verdict{Reason: res.Reason, Message: res.Message}, again, &res.Reason, nil
}

// countRefusal counts a refusal of the XR's credentials once, not once a
// reconcile (capxp_credentials_refusals_total), and remembers it.
func (r *xrReconciler) countRefusal(s *scope) {
	if s.refused == nil {
		return
	}
	if r.memory.refuse(s.XR.GetUID(), *s.refused) && *s.refused != "" {
		credentialsRefusals.WithLabelValues(s.XR.GetNamespace(), *s.refused).Inc()
	}
}

// watchConfig watches (metadata only) the kind of a referenced credentials
// config, mapping each config to the XRs of this kind that name it.
func (r *xrReconciler) watchConfig(ctx context.Context, ref *infrav1.ProviderConfigReference) error {
	m, err := r.client.RESTMapper().RESTMapping(schema.GroupKind{Group: ref.APIGroup, Kind: string(ref.Kind)})
	if err != nil {
		// The resolver reports a kind the API does not serve; nothing to
		// watch yet.
		return nil //nolint:nilerr // reported by the resolver as a verdict.
	}
	if r.access != nil {
		// A kind the bridge may not list and watch is never watched: the
		// informer would retry for good. The resolver refuses it.
		missing, err := r.access.Missing(ctx, m.Resource.GroupResource())
		if err != nil || len(missing) > 0 {
			return err
		}
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(m.GroupVersionKind)
	kind := ref.Kind
	// A config's creation, deletion and spec (its secret) concern the XRs
	// that name it; its status does not. A provider updates a config's
	// status (its users) as managed resources start and stop using it:
	// every XR of a fleet sharing one config would be woken by every other.
	return errors.Wrap(r.tracker.Watch(ctrl.LoggerFrom(ctx), obj, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return referencing(ctx, r.client, r.gvk, o.GetNamespace(), refKind(m.GroupVersionKind.Group, string(kind), o.GetName()))
	}), predicate.GenerationChangedPredicate{}), "cannot watch credentials configs")
}

// providerConfigRefIndex indexes XRs by the credentials they name, so that a
// credentials event lists only the XRs it concerns: each XR naming a config
// has the keys of refKeys.
const providerConfigRefIndex = "capxp.dev/providerConfigRef"

// refKeys are the index keys of an XR that names credentials: any (every
// XR that names some), the config's group, its group and name, and its
// group, kind and name. A query names one.
func refKeys(ref *infrav1.ProviderConfigReference) []string {
	return []string{refAny, refGroup(ref.APIGroup), refName(ref.APIGroup, ref.Name), refKind(ref.APIGroup, string(ref.Kind), ref.Name)}
}

const refAny = "any"

func refGroup(group string) string            { return "group:" + group }
func refName(group, name string) string       { return "name:" + group + "/" + name }
func refKind(group, kind, name string) string { return "kind:" + group + "/" + kind + "/" + name }

// indexProviderConfigRef is the index function of providerConfigRefIndex.
func indexProviderConfigRef(o client.Object) []string {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	if ref := credentials.ReferenceOf(u.Object); ref != nil {
		return refKeys(ref)
	}
	return nil
}

// indexXRs adds providerConfigRefIndex to the cache's informer of an XR
// kind. The informer may carry it already (it outlived an earlier
// controller of the kind): the index is the same.
func indexXRs(ctx context.Context, idx client.FieldIndexer, xr client.Object) error {
	err := idx.IndexField(ctx, xr, providerConfigRefIndex, indexProviderConfigRef)
	if err != nil && strings.Contains(err.Error(), "indexer conflict") {
		return nil
	}
	return errors.Wrap(err, "cannot index composite resources by the credentials they name")
}

// referencing lists the XRs of a kind, in a namespace or all, whose
// providerConfigRef has the index key.
func referencing(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, namespace, key string) []reconcile.Request {
	// The list the XRs' watch fills (unstructured), which holds the index.
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{providerConfigRefIndex: key}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Cannot list the composite resources that name credentials", "kind", gvk.Kind)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
