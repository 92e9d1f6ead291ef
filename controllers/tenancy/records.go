package tenancy

// The record of what each namespace's managed resources may name
// (NamespaceCredentials), kept by the bridge and read by the API server's
// admission policy on managed resources (policy.go): the reconciler and its
// watches. One reconcile: reconcile.go (observe, act), decide.go (decide,
// pure), judge.go (each config judged), write.go (the record written).

import (
	"context"
	"maps"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/access"
)

const (
	errGetNamespace   = "cannot get namespace"
	errListGrants     = "cannot list ClusterProviderConfigGrants"
	errListConfigs    = "cannot list ProviderConfigs"
	errComputeRecord  = "cannot compute the credentials the namespace may use"
	errWriteRecord    = "cannot write NamespaceCredentials"
	nsCredsController = "namespacecredentials"
)

// Records keeps one NamespaceCredentials in every namespace. It reads
// the grants, the namespace's labels, its ProviderConfigs of the enforced
// providers and the Secrets they name (uncached gets: the bridge never
// caches or watches Secrets), and writes the record only when it changes.
type Records struct {
	client client.Client
	// live reads uncached: the configs judged again once locked, and
	// managed resources.
	live client.Reader
	// secrets reads Secrets uncached (the bridge never caches them), on
	// their own rate limit.
	secrets client.Reader
	// relock reads Secrets uncached on the manager-wide budget alone: the
	// second reading of what a reconcile read once and locked.
	relock client.Reader
	// managed lists managed resources uncached, to pause, resume or wait
	// for them: on a budget of its own, so that revocations neither wait
	// on nor slow the manager's other work.
	managed   client.Reader
	providers []credentials.Provider
	// networks are the kinds whose managed resources report the networks
	// a namespace owns.
	networks []credentials.NetworkKind
	all      bool

	ctrl    controller.Controller
	mu      sync.Mutex
	watched map[schema.GroupVersionKind]bool
	// kindSrc watches a kind's objects for the namespaces they are in.
	kindSrc func(obj client.Object, p predicate.Predicate) source.Source
	// marked caches the managed resources the bridge marked revoked;
	// watchedMarked are the kinds watched there.
	marked        cache.Cache
	watchedMarked map[schema.GroupVersionKind]bool
	// access says which managed kinds the manager may read; unreadable
	// are those it was logged it may not.
	access     *access.Reads
	unreadable map[schema.GroupVersionKind]bool
	// lastRead is when the bridge first saw each namespace's configs, and
	// last read their Secrets.
	readMu   sync.Mutex
	lastRead map[string]map[string]readTimes
	// rescan are the namespaces whose marked managed resources changed.
	rescanMu sync.Mutex
	rescan   map[string]bool
	// transform is what the cache of marked managed resources keeps of
	// each.
	transform toolscache.TransformFunc
	// composedKinds returns the kinds a namespace's XRs compose, which a
	// revocation lists first.
	composedKinds func(ctx context.Context, ns string) (map[schema.GroupKind]bool, error)
}

// A RecordsOption configures Records.
type RecordsOption func(*Records)

// WithSecretReaders reads credentials Secrets with secrets (on each
// namespace's budget) and, once locked, again with relock (on the
// manager-wide budget alone). Default: live, both.
func WithSecretReaders(secrets, relock client.Reader) RecordsOption {
	return func(r *Records) { r.secrets, r.relock = secrets, relock }
}

// WithManagedReader lists managed resources with managed (default: live).
func WithManagedReader(managed client.Reader) RecordsOption {
	return func(r *Records) { r.managed = managed }
}

// WithReadAccess skips, and logs once, the kinds reads says the manager may
// not list and watch.
func WithReadAccess(reads *access.Reads) RecordsOption {
	return func(r *Records) { r.access = reads }
}

// WithNetworks has the records list the network IDs the kinds' managed
// resources report.
func WithNetworks(kinds []credentials.NetworkKind) RecordsOption {
	return func(r *Records) { r.networks = kinds }
}

// WithAllClusterConfigs grants every namespace every ClusterProviderConfig:
// for single-tenant management clusters.
func WithAllClusterConfigs() RecordsOption {
	return func(r *Records) { r.all = true }
}

// WithCacheTransform is what the cache of marked managed resources keeps of
// each (the manager's: managed fields stripped).
func WithCacheTransform(t toolscache.TransformFunc) RecordsOption {
	return func(r *Records) { r.transform = t }
}

// WithComposedKinds has a revocation list first the managed kinds that
// composed says the namespace's XRs compose: what they composed is paused
// within the list budget's burst, however many managed kinds the providers
// install; the other kinds follow, at the budget's rate.
func WithComposedKinds(composed func(ctx context.Context, ns string) (map[schema.GroupKind]bool, error)) RecordsOption {
	return func(r *Records) { r.composedKinds = composed }
}

// NewRecords returns the records of the credentials each namespace may use
// with the providers, read with c (cached) and live (uncached).
func NewRecords(c client.Client, live client.Reader, providers []credentials.Provider, opts ...RecordsOption) *Records {
	r := &Records{client: c, live: live, secrets: live, relock: live, managed: live, providers: providers,
		watched: map[schema.GroupVersionKind]bool{}, watchedMarked: map[schema.GroupVersionKind]bool{},
		unreadable: map[schema.GroupVersionKind]bool{}, rescan: map[string]bool{}, lastRead: map[string]map[string]readTimes{}}
	for _, o := range opts {
		o(r)
	}
	return r
}

// SetupWithManager watches namespaces, grants and NamespaceCredentials; the
// providers' ProviderConfig kinds are watched once the API serves them.
func (r *Records) SetupWithManager(mgr ctrl.Manager, o controller.Options) error {
	marked, err := markedCache(mgr, r.transform)
	if err != nil {
		return err
	}
	r.marked = marked
	allNamespaces := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		return r.allNamespaces(ctx)
	})
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(nsCredsController).
		WithOptions(o).
		For(&corev1.Namespace{}, builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, predicate.GenerationChangedPredicate{}))).
		Watches(&infrav1.ClusterProviderConfigGrant{}, allNamespaces).
		Watches(&infrav1.NamespaceCredentials{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
		})).
		// A kind the records read (a ProviderConfig, a network) is watched
		// once a reconcile finds it served; one whose CRD comes later (its
		// package installed after the manager started) has every namespace
		// judged again when its CRD is created or established.
		WatchesMetadata(&extv1.CustomResourceDefinition{}, allNamespaces, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			_, g, _ := strings.Cut(o.GetName(), ".")
			return r.reads(g)
		}))).
		Build(r)
	if err != nil {
		return errors.Wrap(err, "cannot build the NamespaceCredentials controller")
	}
	r.ctrl = c
	r.kindSrc = func(obj client.Object, p predicate.Predicate) source.Source {
		return source.Kind(mgr.GetCache(), obj, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
		}), p)
	}
	return nil
}

// reads reports whether the records read a kind of group: a provider's
// ProviderConfigs, or a network kind.
func (r *Records) reads(group string) bool {
	for _, p := range r.providers {
		if p.ConfigGroup == group {
			return true
		}
	}
	for _, k := range r.networks {
		if k.Group == group {
			return true
		}
	}
	return false
}

func (r *Records) allNamespaces(ctx context.Context) []reconcile.Request {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := r.client.List(ctx, l); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "cannot list namespaces to refresh their credentials")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(l.Items))
	for i := range l.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: l.Items[i].Name}})
	}
	return reqs
}

// watchNetworks starts watching a network kind once, for a change of the
// IDs its managed resources report.
func (r *Records) watchNetworks(gvk schema.GroupVersionKind, k credentials.NetworkKind) error {
	reported := func(o client.Object) map[string]string {
		ids := map[string]string{}
		if u, ok := o.(*unstructured.Unstructured); ok {
			credentials.Networks(k, []unstructured.Unstructured{*u}, ids)
		}
		return ids
	}
	return r.watch(gvk, predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !maps.Equal(reported(e.ObjectOld), reported(e.ObjectNew))
	}})
}

// watch starts watching a kind once (a ProviderConfig kind for a change of
// its spec, a network kind for a change of what it reports).
func (r *Records) watch(gvk schema.GroupVersionKind, p predicate.Predicate) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watched[gvk] || r.ctrl == nil {
		return nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := r.ctrl.Watch(r.kindSrc(u, p)); err != nil {
		return errors.Wrapf(err, "cannot watch %s", gvk.GroupKind())
	}
	r.watched[gvk] = true
	return nil
}
