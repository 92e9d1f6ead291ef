package controllers

// The record of what each namespace's managed resources may name
// (NamespaceCredentials), kept by the bridge and read by the API server's
// admission policy on managed resources (credpolicy.go).

import (
	"context"
	"reflect"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
)

const (
	errGetNamespace   = "cannot get namespace"
	errListGrants     = "cannot list ClusterProviderConfigGrants"
	errListConfigs    = "cannot list ProviderConfigs"
	errGetSecret      = "cannot get a credentials Secret"
	errComputeRecord  = "cannot compute the credentials the namespace may use"
	errWriteRecord    = "cannot write NamespaceCredentials"
	errWatchConfigs   = "cannot watch ProviderConfigs"
	nsCredsController = "namespacecredentials"
)

// nsCredentials keeps one NamespaceCredentials in every namespace. It reads
// the grants, the namespace's labels, its ProviderConfigs of the enforced
// providers and the Secrets they name (uncached gets: the bridge never
// caches or watches Secrets), and writes the record only when it changes.
type nsCredentials struct {
	client    client.Client
	secrets   client.Reader
	providers []credentials.Provider
	all       bool

	ctrl    controller.Controller
	mu      sync.Mutex
	watched map[schema.GroupVersionKind]bool
	kindSrc func(obj client.Object) source.Source
}

// SetupWithManager watches namespaces, grants and NamespaceCredentials; the
// providers' ProviderConfig kinds are watched once the API serves them.
func (r *nsCredentials) SetupWithManager(mgr ctrl.Manager, o controller.Options) error {
	r.watched = map[schema.GroupVersionKind]bool{}
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
		Build(r)
	if err != nil {
		return errors.Wrap(err, "cannot build the NamespaceCredentials controller")
	}
	r.ctrl = c
	r.kindSrc = func(obj client.Object) source.Source {
		return source.Kind(mgr.GetCache(), obj, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
		}), predicate.GenerationChangedPredicate{})
	}
	return nil
}

func (r *nsCredentials) allNamespaces(ctx context.Context) []reconcile.Request {
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

// Reconcile computes and writes one namespace's record.
func (r *nsCredentials) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := &corev1.Namespace{}
	if err := r.client.Get(ctx, req.NamespacedName, ns); err != nil {
		return reconcile.Result{}, errors.Wrap(client.IgnoreNotFound(err), errGetNamespace)
	}
	if !ns.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	grants := &infrav1.ClusterProviderConfigGrantList{}
	if err := r.client.List(ctx, grants); err != nil {
		return reconcile.Result{}, errors.Wrap(err, errListGrants)
	}
	own, missing, err := r.ownConfigs(ctx, ns.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	spec, err := credentials.Usable(ns, grants.Items, r.providers, own, r.all)
	if err != nil {
		return reconcile.Result{}, errors.Wrap(err, errComputeRecord)
	}
	if err := r.write(ctx, ns.Name, spec); err != nil {
		return reconcile.Result{}, err
	}
	var res reconcile.Result
	if missing {
		// The bridge does not watch Secrets: look for a missing one again.
		res.RequeueAfter = credentials.RecheckSecretAfter
	}
	return res, nil
}

// ownConfigs reads the namespace's ProviderConfigs of every enforced
// provider the API serves, and the Secrets they name; missing is true when
// a named Secret does not exist.
func (r *nsCredentials) ownConfigs(ctx context.Context, ns string) ([]credentials.OwnConfig, bool, error) {
	var own []credentials.OwnConfig
	missing := false
	for _, p := range r.providers {
		m, err := r.client.RESTMapper().RESTMapping(schema.GroupKind{Group: p.ConfigGroup, Kind: string(infrav1.ProviderConfigKindNamespaced)})
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, false, errors.Wrapf(err, "cannot map %s ProviderConfig", p.ConfigGroup)
		}
		if m.Scope.Name() != meta.RESTScopeNameNamespace {
			// A legacy cluster-scoped ProviderConfig: namespaced managed
			// resources cannot name it.
			continue
		}
		if err := r.watch(m.GroupVersionKind); err != nil {
			return nil, false, err
		}
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(m.GroupVersionKind.GroupVersion().WithKind(m.GroupVersionKind.Kind + "List"))
		if err := r.client.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil, false, errors.Wrapf(err, "%s %s", errListConfigs, p.ConfigGroup)
		}
		for i := range l.Items {
			spec, _ := l.Items[i].Object["spec"].(map[string]any)
			c := credentials.OwnConfig{Provider: p, Name: l.Items[i].GetName(), Spec: fieldpath.Pave(map[string]any{"spec": spec}), Secrets: map[string]map[string][]byte{}}
			for _, name := range credentials.SecretsNamed(c.Spec) {
				s := &corev1.Secret{}
				err := r.secrets.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s)
				switch {
				case apierrors.IsNotFound(err):
					missing = true
				case err != nil:
					return nil, false, errors.Wrap(err, errGetSecret)
				default:
					c.Secrets[name] = s.Data
				}
			}
			own = append(own, c)
		}
	}
	return own, missing, nil
}

// watch starts watching a ProviderConfig kind once.
func (r *nsCredentials) watch(gvk schema.GroupVersionKind) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watched[gvk] || r.ctrl == nil {
		return nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := r.ctrl.Watch(r.kindSrc(u)); err != nil {
		return errors.Wrap(err, errWatchConfigs)
	}
	r.watched[gvk] = true
	return nil
}

// write creates the record or updates it when it differs; an update carries
// the resourceVersion it read, so a stale record never overwrites a newer
// one.
func (r *nsCredentials) write(ctx context.Context, ns string, spec infrav1.NamespaceCredentialsSpec) error {
	rec := &infrav1.NamespaceCredentials{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: infrav1.NamespaceCredentialsName}, rec)
	switch {
	case apierrors.IsNotFound(err):
		rec = &infrav1.NamespaceCredentials{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: infrav1.NamespaceCredentialsName, Labels: admissionLabels()},
			Spec:       spec,
		}
		return errors.Wrap(client.IgnoreAlreadyExists(r.client.Create(ctx, rec)), errWriteRecord)
	case err != nil:
		return errors.Wrap(err, errWriteRecord)
	case reflect.DeepEqual(rec.Spec, spec):
		return nil
	}
	rec.Spec = spec
	if err := r.client.Update(ctx, rec); err != nil {
		if apierrors.IsConflict(err) {
			// The watch on records brings the namespace back.
			return nil
		}
		return errors.Wrap(err, errWriteRecord)
	}
	return nil
}
