package controllers

// The record of what each namespace's managed resources may name
// (NamespaceCredentials), kept by the bridge and read by the API server's
// admission policy on managed resources (credpolicy.go).

import (
	"context"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	xpmeta "github.com/crossplane/crossplane-runtime/v2/pkg/meta"

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
	client client.Client
	// live reads uncached: the configs judged again once locked, and
	// managed resources.
	live client.Reader
	// secrets reads Secrets uncached (the bridge never caches them), on
	// their own rate limit.
	secrets   client.Reader
	providers []credentials.Provider
	all       bool

	ctrl    controller.Controller
	mu      sync.Mutex
	watched map[schema.GroupVersionKind]bool
	kindSrc func(obj client.Object) source.Source
	// marked caches the managed resources the bridge marked revoked;
	// watchedMarked are the kinds watched there.
	marked        cache.Cache
	watchedMarked map[schema.GroupVersionKind]bool
	// access says which managed kinds the manager may read; unreadable
	// are those it was logged it may not.
	access     *readAccess
	unreadable map[schema.GroupVersionKind]bool
	// rescan are the namespaces whose marked managed resources changed.
	rescanMu sync.Mutex
	rescan   map[string]bool
}

// SetupWithManager watches namespaces, grants and NamespaceCredentials; the
// providers' ProviderConfig kinds are watched once the API serves them.
func (r *nsCredentials) SetupWithManager(mgr ctrl.Manager, o controller.Options) error {
	r.watched = map[schema.GroupVersionKind]bool{}
	r.watchedMarked = map[schema.GroupVersionKind]bool{}
	r.unreadable = map[schema.GroupVersionKind]bool{}
	r.rescan = map[string]bool{}
	marked, err := markedCache(mgr)
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

// Reconcile computes and writes one namespace's record, in the order that
// leaves no moment where a managed resource may use what the bridge has not
// judged: lock what is about to be listed, judge it again from live reads,
// list it; stop admitting what is no longer usable, pause what uses it,
// then unlock it.
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
	// What an earlier manager marked revoked is watched from the start.
	kinds, err := r.managedKinds(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.watchMarked(kinds); err != nil {
		return reconcile.Result{}, err
	}
	rec := &infrav1.NamespaceCredentials{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: infrav1.NamespaceCredentialsName}, rec); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, errors.Wrap(err, errWriteRecord)
		}
		rec = nil
	}
	spec, missing, err := r.judge(ctx, ns, grants.Items, r.client)
	if err != nil {
		return reconcile.Result{}, err
	}
	// What was read may have changed since: lock it first, then judge it
	// again from the API server. Once locked it cannot change, so the
	// second judgment is of what the provider will read.
	for i := 0; len(newLocks(rec, spec.Locked)) > 0; i++ {
		if i == maxLockRounds {
			return reconcile.Result{RequeueAfter: conflictRequeue}, nil
		}
		interim := infrav1.NamespaceCredentialsSpec{}
		if rec != nil {
			interim = *rec.Spec.DeepCopy()
		}
		interim.Locked = credentials.MergeLocks(interim.Locked, spec.Locked)
		if rec, err = r.write(ctx, ns.Name, rec, interim, revocationPending(rec)); err != nil {
			return writeResult(err)
		}
		if spec, missing, err = r.judge(ctx, ns, grants.Items, r.live); err != nil {
			return reconcile.Result{}, err
		}
	}
	var res reconcile.Result
	if missing {
		// The bridge does not watch Secrets: look for a missing one again.
		res.RequeueAfter = credentials.RecheckSecretAfter
	}
	rescan := r.takeRescan(ns.Name)
	changed := rec == nil || !credentials.SameUse(&rec.Spec, &spec)
	if !changed && !revocationPending(rec) && rescan {
		// A resource the bridge marked changed what it names.
		if err := r.revoke(ctx, ns.Name, &spec); err != nil {
			r.rescanLater(ns.Name)
			return reconcile.Result{}, err
		}
	}
	if changed || revocationPending(rec) {
		// Admission first: what is no longer listed is refused from now
		// on. Locks stay until what ran with it is paused.
		interim := *spec.DeepCopy()
		if rec != nil {
			interim.Locked = credentials.MergeLocks(rec.Spec.Locked, spec.Locked)
		}
		if rec, err = r.write(ctx, ns.Name, rec, interim, true); err != nil {
			return writeResult(err)
		}
		// Pause what names what is no longer listed at once, and once more
		// when the API server's admission, which reads records from its
		// own cache, has settled (a create admitted just before the write
		// may be stored just after the list); only then unlock.
		wait := revocationSettles - time.Since(pendingSince(rec))
		if changed || rescan || wait <= 0 {
			if err := r.revoke(ctx, ns.Name, &spec); err != nil {
				return reconcile.Result{}, err
			}
		}
		if wait > 0 {
			return sooner(res, reconcile.Result{RequeueAfter: wait}), nil
		}
	}
	if _, err := r.write(ctx, ns.Name, rec, spec, false); err != nil {
		return writeResult(err)
	}
	return res, nil
}

// revocationSettles is how long after a record stops listing a config the
// bridge pauses what names it once more, and only then unlocks it.
const revocationSettles = 2 * time.Second

// pendingSince is when the record was marked pending; the zero time when it
// is not, or the mark cannot be read.
func pendingSince(rec *infrav1.NamespaceCredentials) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, rec.GetAnnotations()[revocationPendingAnnotation])
	return t
}

// maxLockRounds bounds how often one reconcile locks and judges again a
// namespace whose configs keep changing under it.
const maxLockRounds = 3

// revocationPendingAnnotation marks a record written before the managed
// resources that use what it no longer lists were paused: the next
// reconcile, of this manager or the next, pauses them.
const revocationPendingAnnotation = "capxp.dev/revocation-pending"

func revocationPending(rec *infrav1.NamespaceCredentials) bool {
	return rec != nil && rec.GetAnnotations()[revocationPendingAnnotation] != ""
}

// newLocks returns the locks of want the record does not hold yet.
func newLocks(rec *infrav1.NamespaceCredentials, want []infrav1.LockedObject) []infrav1.LockedObject {
	held := map[infrav1.LockedObject]bool{}
	if rec != nil {
		for _, l := range rec.Spec.Locked {
			held[l] = true
		}
	}
	var out []infrav1.LockedObject
	for _, l := range want {
		if !held[l] {
			out = append(out, l)
		}
	}
	return out
}

// writeResult turns a conflict on the record into a quiet retry.
func writeResult(err error) (reconcile.Result, error) {
	if c := errors.Cause(err); apierrors.IsConflict(c) || apierrors.IsAlreadyExists(c) {
		return reconcile.Result{RequeueAfter: conflictRequeue}, nil
	}
	return reconcile.Result{}, err
}

// judge computes the record a namespace's configs, as read with configs,
// earn it.
func (r *nsCredentials) judge(ctx context.Context, ns *corev1.Namespace, grants []infrav1.ClusterProviderConfigGrant, configs client.Reader) (infrav1.NamespaceCredentialsSpec, bool, error) {
	own, missing, err := r.ownConfigs(ctx, ns.Name, configs)
	if err != nil {
		return infrav1.NamespaceCredentialsSpec{}, false, err
	}
	spec, err := credentials.Usable(ns, grants, r.providers, own, r.all)
	return spec, missing, errors.Wrap(err, errComputeRecord)
}

// ownConfigs reads the namespace's ProviderConfigs of every enforced
// provider the API serves, and the Secrets they name; missing is true when
// a named Secret does not exist.
func (r *nsCredentials) ownConfigs(ctx context.Context, ns string, configs client.Reader) ([]credentials.OwnConfig, bool, error) {
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
		if err := configs.List(ctx, l, client.InNamespace(ns)); err != nil {
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

// write creates the record or updates it when it differs. A pending record
// carries when it became pending (a change of what it admits restarts
// that). An update carries the resourceVersion read, so a record decided
// on a stale read never lands; a conflict is returned.
func (r *nsCredentials) write(ctx context.Context, ns string, rec *infrav1.NamespaceCredentials, spec infrav1.NamespaceCredentialsSpec, pending bool) (*infrav1.NamespaceCredentials, error) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	if rec == nil {
		rec = &infrav1.NamespaceCredentials{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: infrav1.NamespaceCredentialsName, Labels: admissionLabels()},
			Spec:       spec,
		}
		if pending {
			rec.SetAnnotations(map[string]string{revocationPendingAnnotation: now})
		}
		return rec, errors.Wrap(r.client.Create(ctx, rec), errWriteRecord)
	}
	stamp := rec.GetAnnotations()[revocationPendingAnnotation]
	switch {
	case !pending:
		stamp = ""
	case stamp == "" || !credentials.SameUse(&rec.Spec, &spec):
		stamp = now
	}
	if reflect.DeepEqual(rec.Spec, spec) && rec.GetAnnotations()[revocationPendingAnnotation] == stamp {
		return rec, nil
	}
	rec = rec.DeepCopy()
	rec.Spec = spec
	xpmeta.RemoveAnnotations(rec, revocationPendingAnnotation)
	if stamp != "" {
		xpmeta.AddAnnotations(rec, map[string]string{revocationPendingAnnotation: stamp})
	}
	return rec, errors.Wrap(r.client.Update(ctx, rec), errWriteRecord)
}
