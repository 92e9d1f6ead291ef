package tenancy

// Revocation where credentials are used: when a namespace's record stops
// listing a config, every managed resource of the namespace that names it
// is paused, found by what it names, whatever state its XR is in.

import (
	"context"
	"maps"
	"strings"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	xpmeta "github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/composed"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/policies"
)

// listPageSize is how many objects an uncached list reads at a time: the
// managed resources of one kind a revocation pauses, a namespace's Secrets.
const listPageSize = 500

// managedKind is a served kind of an enforced provider's managed resources.
type managedKind struct {
	gvk      schema.GroupVersionKind
	resource schema.GroupResource
	provider credentials.Provider
}

// readable keeps the kinds the manager may get, list and watch; the others
// are logged, once each: admission still refuses their new resources with
// revoked credentials, but the bridge cannot pause those that exist. A
// platform grants the manager list, watch and patch on its own kinds as
// config/rbac/backends.yaml does for the shipped ones.
func (r *Records) readable(ctx context.Context, kinds []managedKind) ([]managedKind, error) {
	if r.access == nil {
		return kinds, nil
	}
	out := kinds[:0:0]
	for i := range kinds {
		k := &kinds[i]
		missing, err := r.access.Missing(ctx, k.resource)
		if err != nil {
			return nil, err
		}
		if len(missing) == 0 {
			out = append(out, *k)
			continue
		}
		r.mu.Lock()
		logged := r.unreadable[k.gvk]
		r.unreadable[k.gvk] = true
		r.mu.Unlock()
		if !logged {
			ctrl.LoggerFrom(ctx).Info("Cannot pause managed resources of this kind whose credentials are revoked: grant the manager list, watch and patch on it",
				"kind", k.gvk.String(), "missing", missing)
		}
	}
	return out, nil
}

// managedKinds returns the namespaced managed resource kinds of the
// enforced providers whose CRDs are installed (a CRD's name is
// plural.group), their credentials kinds left out.
func (r *Records) managedKinds(ctx context.Context) ([]managedKind, error) {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(extv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList"))
	if err := r.client.List(ctx, l); err != nil {
		return nil, errors.Wrap(err, "cannot list CRDs")
	}
	var out []managedKind
	for i := range l.Items {
		plural, group, _ := strings.Cut(l.Items[i].Name, ".")
		for _, p := range r.providers {
			if !p.Manages(group) {
				continue
			}
			gvk, err := r.client.RESTMapper().KindFor(schema.GroupVersionResource{Group: group, Resource: plural})
			if err != nil {
				// Not served yet: nothing of it exists to pause.
				continue
			}
			m, err := r.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil || m.Scope.Name() != meta.RESTScopeNameNamespace || isCredentialsKind(gvk.Kind) {
				continue
			}
			out = append(out, managedKind{gvk: gvk, resource: schema.GroupResource{Group: group, Resource: plural}, provider: p})
		}
	}
	return r.readable(ctx, out)
}

func isCredentialsKind(kind string) bool {
	for _, k := range policies.CredentialsKinds {
		if k == kind {
			return true
		}
	}
	return false
}

// revoke pauses every managed resource of the namespace that names a config
// spec does not list, and resumes those it paused whose config spec lists
// again. It reads each kind uncached, page by page: the bridge does not
// cache managed resources, and a revocation is rare. A kind the bridge may
// not list is skipped (readable); every error is returned once all kinds
// were tried.
func (r *Records) revoke(ctx context.Context, ns string, spec *infrav1.NamespaceCredentialsSpec) error {
	kinds, err := r.managedKinds(ctx)
	if err != nil {
		return err
	}
	if err := r.watchMarked(kinds); err != nil {
		return err
	}
	if r.composedKinds != nil {
		first, err := r.composedKinds(ctx, ns)
		if err != nil {
			// Only the order is lost: every kind is still listed.
			ctrl.LoggerFrom(ctx).Info("Cannot tell which kinds the namespace's XRs compose; listing every managed kind in turn", "error", err.Error())
		}
		kinds = composedFirst(kinds, first)
	}
	var errs []error
	for i := range kinds {
		k := &kinds[i]
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
		for cont := ""; ; {
			l.Items = nil
			err := r.managed.List(ctx, l, client.InNamespace(ns), client.Limit(listPageSize), client.Continue(cont))
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				// The kind went since it was read.
				break
			}
			if err != nil {
				errs = append(errs, errors.Wrapf(err, "cannot list %s", k.gvk.Kind))
				break
			}
			for i := range l.Items {
				if err := r.revokeOne(ctx, &l.Items[i], k.provider, spec); err != nil {
					errs = append(errs, err)
				}
			}
			if cont = l.GetContinue(); cont == "" {
				break
			}
		}
	}
	return kerrors.NewAggregate(errs)
}

// composedFirst orders kinds with those of first ahead, each part in its
// own order.
func composedFirst(kinds []managedKind, first map[schema.GroupKind]bool) []managedKind {
	out := make([]managedKind, 0, len(kinds))
	for _, want := range []bool{true, false} {
		for i := range kinds {
			if first[kinds[i].gvk.GroupKind()] == want {
				out = append(out, kinds[i])
			}
		}
	}
	return out
}

// resumeMarked resumes what the bridge paused in the namespace whose config
// spec lists again, finding it in the cache of what the bridge marked: it
// lists nothing from the API server when nothing is marked.
func (r *Records) resumeMarked(ctx context.Context, ns string, spec *infrav1.NamespaceCredentialsSpec) error {
	if r.marked == nil {
		return r.revoke(ctx, ns, spec)
	}
	kinds, err := r.managedKinds(ctx)
	if err != nil {
		return err
	}
	for i := range kinds {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(kinds[i].gvk.GroupVersion().WithKind(kinds[i].gvk.Kind + "List"))
		if err := r.marked.List(ctx, l, client.InNamespace(ns), client.Limit(1)); err != nil {
			return errors.Wrapf(err, "cannot list marked %s", kinds[i].gvk.Kind)
		}
		if len(l.Items) > 0 {
			return r.revoke(ctx, ns, spec)
		}
	}
	return nil
}

// revokeOne pauses or resumes one managed resource, with the
// resourceVersion it was read at: a resource whose reference changed since
// is decided again.
func (r *Records) revokeOne(ctx context.Context, mr *unstructured.Unstructured, p credentials.Provider, spec *infrav1.NamespaceCredentialsSpec) error {
	kind, _, _ := unstructured.NestedString(mr.Object, "spec", "providerConfigRef", "kind")
	name, _, _ := unstructured.NestedString(mr.Object, "spec", "providerConfigRef", "name")
	admitted := credentials.Admits(spec, p.ConfigGroup, kind, name)
	meta := map[string]string{}
	maps.Copy(meta, mr.GetAnnotations())
	if v, ok := mr.GetLabels()[infrav1.CredentialsRevokedLabel]; ok {
		meta[infrav1.CredentialsRevokedLabel] = v
	}
	set, remove := credentials.Revocation(meta, admitted)
	if set == nil && remove == nil {
		return nil
	}
	orig := mr.DeepCopy()
	for k, v := range set {
		if k == infrav1.CredentialsRevokedLabel {
			xpmeta.AddLabels(mr, map[string]string{k: v})
			continue
		}
		xpmeta.AddAnnotations(mr, map[string]string{k: v})
	}
	for _, k := range remove {
		if k == infrav1.CredentialsRevokedLabel {
			xpmeta.RemoveLabels(mr, k)
			continue
		}
		xpmeta.RemoveAnnotations(mr, k)
	}
	err := r.client.Patch(ctx, mr, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(composed.FieldManager))
	if err = client.IgnoreNotFound(err); err != nil {
		return errors.Wrapf(err, "cannot pause or resume %s %s", mr.GetKind(), mr.GetName())
	}
	if !admitted {
		ctrl.LoggerFrom(ctx).Info("Paused managed resource: the credentials it names were revoked", "kind", mr.GetKind(), "name", mr.GetName(),
			"providerConfig", kind+"/"+name)
	}
	return nil
}

// watchMarked watches, metadata only, the managed resources of each kind
// that carry the bridge's revocation mark (a label selector: nothing else
// is cached). A marked resource whose spec changes (its reference now
// names another config) has its namespace scanned again: resumed when its
// namespace may use what it names now. The first list after a start scans
// every namespace that has one, so what an earlier manager marked is
// decided again.
func (r *Records) watchMarked(kinds []managedKind) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.marked == nil || r.ctrl == nil {
		return nil
	}
	for i := range kinds {
		k := &kinds[i]
		if r.watchedMarked[k.gvk] {
			continue
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(k.gvk)
		src := source.Kind(r.marked, client.Object(obj), handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			r.rescanLater(o.GetNamespace())
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
		}), predicate.GenerationChangedPredicate{})
		if err := r.ctrl.Watch(src); err != nil {
			return errors.Wrapf(err, "cannot watch marked %s", k.gvk.Kind)
		}
		r.watchedMarked[k.gvk] = true
	}
	return nil
}

// rescanLater has the namespace's next reconcile scan its managed
// resources, whatever its record says.
func (r *Records) rescanLater(ns string) {
	r.rescanMu.Lock()
	defer r.rescanMu.Unlock()
	r.rescan[ns] = true
}

// takeRescan reports whether the namespace is to be scanned, and forgets
// it.
func (r *Records) takeRescan(ns string) bool {
	r.rescanMu.Lock()
	defer r.rescanMu.Unlock()
	ok := r.rescan[ns]
	delete(r.rescan, ns)
	return ok
}

// markedCache is a cache of managed resources' metadata selected by the
// bridge's revocation mark.
func markedCache(mgr ctrl.Manager, transform toolscache.TransformFunc) (cache.Cache, error) {
	req, err := labels.NewRequirement(infrav1.CredentialsRevokedLabel, selection.Exists, nil)
	if err != nil {
		return nil, errors.Wrap(err, "cannot select marked managed resources")
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultLabelSelector: labels.NewSelector().Add(*req),
		DefaultTransform:     transform,
	})
	if err != nil {
		return nil, errors.Wrap(err, "cannot build the cache of marked managed resources")
	}
	return c, errors.Wrap(mgr.Add(c), "cannot run the cache of marked managed resources")
}
