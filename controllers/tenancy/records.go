package tenancy

// The record of what each namespace's managed resources may name
// (NamespaceCredentials), kept by the bridge and read by the API server's
// admission policy on managed resources (credpolicy.go).

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/cluster-api/util"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	xpmeta "github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/access"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/budget"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/policies"
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

// Reconcile computes and writes one namespace's record, in the order that
// leaves no moment where a managed resource may use what the bridge has not
// judged: lock what is about to be listed and, once the lock is in force,
// judge it again from live reads and list it; stop admitting what is no
// longer usable, pause what uses it, then unlock it. Every failure to judge
// one config is a verdict on it; a failure to judge the namespace's configs
// at all still writes what the grants give and take.
func (r *Records) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var releasing reconcile.Result
	res, err := r.reconcile(ctx, req, &releasing)
	return util.LowestNonZeroResult(res, releasing), err
}

// reconcile is Reconcile; releasing is set to when a deleted record that
// is still judged with looks again for what needs it.
func (r *Records) reconcile(ctx context.Context, req reconcile.Request, releasing *reconcile.Result) (reconcile.Result, error) {
	ns := &corev1.Namespace{}
	if err := r.client.Get(ctx, req.NamespacedName, ns); err != nil {
		return reconcile.Result{}, errors.Wrap(client.IgnoreNotFound(err), errGetNamespace)
	}
	rec := &infrav1.NamespaceCredentials{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: infrav1.NamespaceCredentialsName}, rec); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, errors.Wrap(err, errWriteRecord)
		}
		rec = nil
	}
	if rec != nil && !rec.DeletionTimestamp.IsZero() {
		// Deleted (with its namespace, its CRD, or by hand): it goes once
		// nothing the policies judge with it is left.
		res, released, err := r.release(ctx, rec)
		if released || err != nil || !ns.DeletionTimestamp.IsZero() {
			return res, err
		}
		// Its namespace stays: it is still kept, for what is left.
		*releasing = res
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
	var prev *infrav1.NamespaceCredentialsSpec
	if rec != nil {
		prev = &rec.Spec
	}
	// Configs are read from the cache, but once the record has locked
	// what it is about to list: then from the API server, once the lock is
	// in force, so that what is judged is what the lock keeps.
	configs, relocked := client.Reader(r.client), false
	if since := lockedSince(rec); !since.IsZero() {
		if wait := lockSettles - time.Since(since); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		configs, relocked = r.live, true
	}
	spec, j, err := r.judge(ctx, ns, grants.Items, configs, prev, relocked)
	p := decide(observed{rec: rec, spec: spec, judged: j, judgeErr: err, rescan: r.takeRescan(ns.Name), now: time.Now()})
	return r.act(ctx, ns, rec, grants.Items, p)
}

// observed is what one reconcile of a namespace's record read.
type observed struct {
	// rec is the record as read; nil when there is none.
	rec *infrav1.NamespaceCredentials
	// spec is the record the grants and the namespace's configs earn it
	// now, as judged; judgeErr when its configs could not be judged.
	spec     infrav1.NamespaceCredentialsSpec
	judged   judgement
	judgeErr error
	// rescan: a managed resource the bridge marked changed what it names.
	rescan bool
	now    time.Time
}

// plan is what one reconcile of a namespace's record does, in this order.
type plan struct {
	// keepRescan leaves the rescan to a later reconcile.
	keepRescan bool
	// grantsOnly writes what the grants give and take, with the record's
	// own verdicts and the new locks, and pauses what the grants no
	// longer give: nothing else.
	grantsOnly bool
	locks      []infrav1.LockedObject
	// interim is written first, marked pending: admission refuses what it
	// no longer lists from then on; its locks stay.
	interim *infrav1.NamespaceCredentialsSpec
	// revoke pauses what names a config it does not list.
	revoke *infrav1.NamespaceCredentialsSpec
	// final is written last, not pending; nil while a revocation settles.
	final *infrav1.NamespaceCredentialsSpec
	// resume resumes what the bridge paused that final lists again.
	resume bool
	// err is returned once the plan is carried out.
	err    error
	result reconcile.Result
}

// decide plans the reconcile of a namespace's record from what it observed,
// in the order that leaves no moment where a managed resource may use what
// the bridge has not judged (Reconcile).
func decide(o observed) plan {
	if o.judgeErr != nil {
		// What the platform grants and revokes never waits on judging
		// what the namespace owns.
		return plan{keepRescan: o.rescan, grantsOnly: true, err: o.judgeErr}
	}
	if locks := newLocks(o.rec, o.spec.Locked); len(locks) > 0 {
		// What was read may change until the API server enforces the
		// lock: lock it, with what the grants give the namespace now, and
		// judge it again once the lock is in force.
		return plan{keepRescan: o.rescan, grantsOnly: true, locks: locks, result: reconcile.Result{RequeueAfter: lockSettles}}
	}
	spec, res := o.spec, o.judged.requeue()
	pending := revocationPending(o.rec)
	changed := o.rec == nil || !credentials.SameUse(&o.rec.Spec, &spec)
	switch {
	case changed && !o.rescan && !pending && o.rec != nil && !credentials.Removed(&o.rec.Spec, &spec):
		// It admits more and refuses nothing new: nothing to pause, and no
		// create to race. Only what the bridge marked may resume.
		return plan{final: &spec, resume: true, result: res}
	case !changed && !pending && o.rescan:
		// A resource the bridge marked changed what it names.
		return plan{revoke: &spec, final: &spec, result: res}
	case !changed && !pending:
		return plan{final: &spec, result: res}
	}
	// Admission first: what is no longer listed is refused from now on.
	// Locks stay until what ran with it is paused. Pause what names what is
	// no longer listed at once, and once more when the API server's
	// admission, which reads records from its own cache, has settled (a
	// create admitted just before the write may be stored just after the
	// list); only then unlock.
	interim := *spec.DeepCopy()
	if o.rec != nil {
		interim.Locked = credentials.MergeLocks(o.rec.Spec.Locked, spec.Locked)
	}
	wait := revocationSettles
	if !changed {
		wait -= o.now.Sub(pendingSince(o.rec))
	}
	p := plan{interim: &interim, result: res}
	if changed || o.rescan || wait <= 0 {
		p.revoke = &spec
	}
	if wait > 0 {
		p.result = util.LowestNonZeroResult(res, reconcile.Result{RequeueAfter: wait})
		return p
	}
	p.final = &spec
	return p
}

// act carries out a plan for the namespace whose record was read as rec.
func (r *Records) act(ctx context.Context, ns *corev1.Namespace, rec *infrav1.NamespaceCredentials, grants []infrav1.ClusterProviderConfigGrant, p plan) (reconcile.Result, error) {
	if p.keepRescan {
		r.rescanLater(ns.Name)
	}
	if p.grantsOnly {
		err := r.grantsFirst(ctx, ns, rec, grants, p.locks)
		if p.err != nil {
			return reconcile.Result{}, kerrors.NewAggregate([]error{p.err, err})
		}
		if err != nil {
			return writeResult(err)
		}
		return p.result, nil
	}
	var err error
	if p.interim != nil {
		if rec, err = r.write(ctx, ns.Name, rec, *p.interim, true); err != nil {
			return writeResult(err)
		}
	}
	if p.revoke != nil {
		if err := r.revoke(ctx, ns.Name, p.revoke); err != nil {
			// Scanned again, whether or not the record stays pending.
			r.rescanLater(ns.Name)
			return reconcile.Result{}, err
		}
	}
	if p.final == nil {
		return p.result, nil
	}
	if rec, err = r.write(ctx, ns.Name, rec, *p.final, false); err != nil {
		return writeResult(err)
	}
	if p.resume {
		return p.result, r.resumeMarked(ctx, ns.Name, &rec.Spec)
	}
	return p.result, nil
}

// grantsFirst writes the record with the shared configs the grants give the
// namespace now and its own configs as the record has them, and pauses what
// names a shared config no longer granted: for a reconcile that could not
// judge the namespace's own configs, or that locks first what it judged
// (locks, marked with when they were added).
func (r *Records) grantsFirst(ctx context.Context, ns *corev1.Namespace, rec *infrav1.NamespaceCredentials, grants []infrav1.ClusterProviderConfigGrant, locks []infrav1.LockedObject) error {
	var prev *infrav1.NamespaceCredentialsSpec
	if rec != nil {
		prev = &rec.Spec
	}
	spec := credentials.WithGrants(ns, grants, r.providers, r.all, prev)
	spec.Locked = credentials.MergeLocks(spec.Locked, locks)
	changed := rec == nil || !credentials.SameUse(&rec.Spec, &spec)
	if !changed && len(locks) == 0 {
		return nil
	}
	lockedAt := ""
	if len(locks) > 0 {
		lockedAt = time.Now().UTC().Format(time.RFC3339Nano)
	}
	rec, err := r.writeMarked(ctx, ns.Name, rec, spec, changed || revocationPending(rec), lockedAt)
	if err != nil || !changed {
		return err
	}
	return r.revoke(ctx, ns.Name, &rec.Spec)
}

// lockSettles is how long after a record adds a lock the bridge judges
// again what it locked: by then the API server's policy, which reads records
// from its own cache, enforces the lock.
const lockSettles = 2 * time.Second

// lockedAnnotation marks a record that added locks and has not yet judged
// again what they keep; it holds when they were added.
const lockedAnnotation = "capxp.dev/locked-at"

// lockedSince is when the record added locks not judged again since; the
// zero time when there are none.
func lockedSince(rec *infrav1.NamespaceCredentials) time.Time {
	if rec == nil {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, rec.GetAnnotations()[lockedAnnotation])
	return t
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

// unreadableRecheck is how soon a Secret that could not be read is read
// again; its config is refused meanwhile.
const unreadableRecheck = 10 * time.Second

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

// conflictRequeue is how soon a record whose write met a newer one is
// judged again.
const conflictRequeue = 100 * time.Millisecond

// writeResult turns a conflict on the record into a quiet retry.
func writeResult(err error) (reconcile.Result, error) {
	if c := errors.Cause(err); apierrors.IsConflict(c) || apierrors.IsAlreadyExists(c) {
		return reconcile.Result{RequeueAfter: conflictRequeue}, nil
	}
	return reconcile.Result{}, err
}

// judgement says what a judgement could not settle: a named Secret is
// missing; the namespace's Secret reads were spent, more may be read after
// unread; a Secret could not be read.
type judgement struct {
	missing bool
	unread  time.Duration
	// failed: a Secret could not be read, and its config was refused.
	failed bool
}

// requeue is how soon what the judgement could not settle is judged again.
func (j judgement) requeue() reconcile.Result {
	var res reconcile.Result
	if j.missing {
		// The bridge does not watch Secrets: look for a missing one again.
		res.RequeueAfter = credentials.RecheckSecretAfter
	}
	if j.failed {
		res = util.LowestNonZeroResult(res, reconcile.Result{RequeueAfter: unreadableRecheck})
	}
	if j.unread > 0 {
		// The namespace's Secret reads were spent: judge the rest in turn.
		res = util.LowestNonZeroResult(res, reconcile.Result{RequeueAfter: j.unread})
	}
	return res
}

// judge computes the record a namespace's configs, as read with configs,
// earn it; prev is its record as read, whose verdicts stand for what is not
// read again. relocked: the record has just locked what it judged, and
// the configs it locked are read again first, on the manager-wide budget.
func (r *Records) judge(ctx context.Context, ns *corev1.Namespace, grants []infrav1.ClusterProviderConfigGrant, configs client.Reader, prev *infrav1.NamespaceCredentialsSpec, relocked bool) (infrav1.NamespaceCredentialsSpec, judgement, error) {
	own, j, err := r.ownConfigs(ctx, ns.Name, configs, prev, relocked)
	if err != nil {
		return infrav1.NamespaceCredentialsSpec{}, j, err
	}
	spec, err := credentials.Usable(ns, grants, r.providers, own, r.all, prev)
	if err != nil {
		return spec, j, errors.Wrap(err, errComputeRecord)
	}
	spec.Networks, err = r.ownNetworks(ctx, ns.Name)
	return spec, j, err
}

// ownNetworks reads the network IDs the namespace's own managed resources
// report, from the cache (the kinds are watched for a change of what they
// report); nil when there are none.
func (r *Records) ownNetworks(ctx context.Context, ns string) (map[string]string, error) {
	owned := map[string]string{}
	for _, k := range r.networks {
		m, err := r.client.RESTMapper().RESTMapping(k.GroupKind)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, errors.Wrapf(err, "cannot map %s", k.GroupKind)
		}
		if m.Scope.Name() != meta.RESTScopeNameNamespace {
			continue
		}
		if ok, err := r.mayRead(ctx, m, "Cannot list the networks the namespace owns: grant the manager list and watch on this kind"); !ok || err != nil {
			// Not readable: the namespace owns no network of the kind.
			if err != nil {
				return nil, err
			}
			continue
		}
		if err := r.watchNetworks(m.GroupVersionKind, k); err != nil {
			return nil, err
		}
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(m.GroupVersionKind.GroupVersion().WithKind(m.GroupVersionKind.Kind + "List"))
		if err := r.client.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil, errors.Wrapf(err, "cannot list %s", k.GroupKind)
		}
		credentials.Networks(k, l.Items, owned)
	}
	if len(owned) > credentials.MaxNetworks {
		// Bounded, whatever the namespace composes: the IDs past the limit
		// are not its to name.
		ids := slices.Sorted(maps.Keys(owned))
		for _, id := range ids[credentials.MaxNetworks:] {
			delete(owned, id)
		}
	}
	if len(owned) == 0 {
		return nil, nil
	}
	return owned, nil
}

// mayRead reports whether the manager may list and watch the kind; the
// first time it may not, it logs why.
func (r *Records) mayRead(ctx context.Context, m *meta.RESTMapping, why string) (bool, error) {
	if r.access == nil {
		return true, nil
	}
	missing, err := r.access.Missing(ctx, m.Resource.GroupResource())
	if err != nil || len(missing) == 0 {
		return err == nil, err
	}
	r.mu.Lock()
	logged := r.unreadable[m.GroupVersionKind]
	r.unreadable[m.GroupVersionKind] = true
	r.mu.Unlock()
	if !logged {
		ctrl.LoggerFrom(ctx).Info(why, "kind", m.GroupVersionKind.String(), "missing", missing)
	}
	return false, nil
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

// ownConfigs reads the namespace's ProviderConfigs of every enforced
// provider the API serves, and the Secrets they name: not those of a config
// whose verdict in prev stands (credentials.Carried), and, once the
// namespace's reads are spent, not those of the configs read least recently.
func (r *Records) ownConfigs(ctx context.Context, ns string, configs client.Reader, prev *infrav1.NamespaceCredentialsSpec, relocked bool) ([]credentials.OwnConfig, judgement, error) {
	var own []credentials.OwnConfig
	var created []time.Time
	var j judgement
	for _, p := range r.providers {
		m, err := r.client.RESTMapper().RESTMapping(schema.GroupKind{Group: p.ConfigGroup, Kind: string(infrav1.ProviderConfigKindNamespaced)})
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, j, errors.Wrapf(err, "cannot map %s ProviderConfig", p.ConfigGroup)
		}
		if m.Scope.Name() != meta.RESTScopeNameNamespace {
			// A legacy cluster-scoped ProviderConfig: namespaced managed
			// resources cannot name it.
			continue
		}
		if ok, err := r.mayRead(ctx, m, "Cannot judge the namespace's own ProviderConfigs of this kind: grant the manager list and watch on it"); !ok || err != nil {
			// Not readable: none of them is listed usable.
			if err != nil {
				return nil, j, err
			}
			continue
		}
		if err := r.watch(m.GroupVersionKind, predicate.GenerationChangedPredicate{}); err != nil {
			return nil, j, err
		}
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(m.GroupVersionKind.GroupVersion().WithKind(m.GroupVersionKind.Kind + "List"))
		if err := configs.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil, j, errors.Wrapf(err, "%s %s", errListConfigs, p.ConfigGroup)
		}
		for i := range l.Items {
			spec, _ := l.Items[i].Object["spec"].(map[string]any)
			c := credentials.OwnConfig{Provider: p, Name: l.Items[i].GetName(), Spec: fieldpath.Pave(map[string]any{"spec": spec}), Secrets: map[string]map[string][]byte{}}
			c.Unread = credentials.Carried(prev, &c)
			own = append(own, c)
			created = append(created, l.Items[i].GetCreationTimestamp().Time)
		}
	}
	// The configs never read first, the newest first, then the least
	// recently read: a namespace whose reads run out has a new config
	// judged at once, and every other in turn.
	order := r.readOrder(ns, own, created)
	if relocked {
		// What the record locked to judge again comes first, and is read
		// on the manager-wide budget: it was read on the namespace's
		// once, and cannot change since.
		again := func(i int) bool { return !own[i].Unread && credentials.Locked(prev, &own[i]) }
		sort.SliceStable(order, func(a, b int) bool { return again(order[a]) && !again(order[b]) })
	}
	for _, i := range order {
		c := &own[i]
		if c.Unread {
			continue
		}
		secrets := r.secrets
		if relocked && credentials.Locked(prev, c) {
			secrets = r.relock
		} else if j.unread > 0 {
			c.Unread = true
			continue
		}
		for _, name := range credentials.SecretsNamed(c.Spec) {
			// Every failure here is a verdict on this config alone: the
			// others are judged, and the record written, whatever it is.
			if why := credentials.InvalidSecretRef(ns, name); why != "" {
				c.Unreadable = map[string]string{name: why}
				break
			}
			s := &corev1.Secret{}
			err := secrets.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s)
			var spent *budget.Exceeded
			switch {
			case errors.As(err, &spent):
				j.unread = spent.RetryAfter
				c.Unread = true
			case apierrors.IsNotFound(err):
				j.missing = true
			case err != nil:
				// Refused until a read succeeds; read again soon. The
				// message keeps the error's reason only: it must not
				// change from one try to the next.
				c.Unreadable = map[string]string{name: fmt.Sprintf("Secret %s/%s cannot be read (%s); it is read again", ns, name, apierrors.ReasonForError(err))}
				j.failed = true
				ctrl.LoggerFrom(ctx).Info("Cannot read a credentials Secret: its ProviderConfig is refused until it can be", "secret", klog.KRef(ns, name), "error", err.Error())
			default:
				c.Secrets[name] = s.Data
			}
			if c.Unread || c.Unreadable != nil {
				break
			}
		}
		if !c.Unread {
			r.read(ns, c)
		}
	}
	return own, j, nil
}

// readOrder returns the indexes of own: the configs never read, those the
// bridge saw last first, then the others, least recently read first; it
// forgets configs that no longer exist.
func (r *Records) readOrder(ns string, own []credentials.OwnConfig, created []time.Time) []int {
	r.readMu.Lock()
	defer r.readMu.Unlock()
	now := time.Now()
	last := r.lastRead[ns]
	kept := make(map[string]readTimes, len(own))
	order := make([]int, len(own))
	keys := make([]string, len(own))
	for i := range own {
		order[i] = i
		keys[i] = own[i].Provider.ConfigGroup + "/" + own[i].Name
		t, ok := last[keys[i]]
		if !ok {
			t.seen = now
		}
		kept[keys[i]] = t
	}
	if len(kept) == 0 {
		delete(r.lastRead, ns)
	} else {
		r.lastRead[ns] = kept
	}
	sort.SliceStable(order, func(a, b int) bool {
		ta, tb := kept[keys[order[a]]], kept[keys[order[b]]]
		switch {
		case ta.read.IsZero() && tb.read.IsZero() && !ta.seen.Equal(tb.seen):
			return ta.seen.After(tb.seen)
		case ta.read.IsZero() && tb.read.IsZero():
			return created[order[a]].After(created[order[b]])
		}
		return ta.read.Before(tb.read)
	})
	return order
}

// readTimes are when the bridge first saw a config, and last read its
// Secrets.
type readTimes struct{ seen, read time.Time }

// read notes that the namespace's config was read.
func (r *Records) read(ns string, c *credentials.OwnConfig) {
	r.readMu.Lock()
	defer r.readMu.Unlock()
	k := c.Provider.ConfigGroup + "/" + c.Name
	t := r.lastRead[ns][k]
	t.read = time.Now()
	if r.lastRead[ns] == nil {
		r.lastRead[ns] = map[string]readTimes{}
	}
	r.lastRead[ns][k] = t
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

// write creates the record or updates it when it differs. A pending record
// carries when it became pending (a change of what it admits restarts
// that). An update carries the resourceVersion read, so a record decided
// on a stale read never lands; a conflict is returned. It clears the lock
// mark: what the record locks has been judged again.
func (r *Records) write(ctx context.Context, ns string, rec *infrav1.NamespaceCredentials, spec infrav1.NamespaceCredentialsSpec, pending bool) (*infrav1.NamespaceCredentials, error) {
	return r.writeMarked(ctx, ns, rec, spec, pending, "")
}

// writeMarked is write that sets the lock mark to lockedAt, unless empty.
func (r *Records) writeMarked(ctx context.Context, ns string, rec *infrav1.NamespaceCredentials, spec infrav1.NamespaceCredentialsSpec, pending bool, lockedAt string) (*infrav1.NamespaceCredentials, error) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	if rec == nil {
		rec = &infrav1.NamespaceCredentials{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: infrav1.NamespaceCredentialsName, Labels: policies.Labels()},
			Spec:       spec,
		}
		if needsFinalizer(&spec) {
			rec.Finalizers = []string{infrav1.NamespaceCredentialsFinalizer}
		}
		marks := map[string]string{}
		if pending {
			marks[revocationPendingAnnotation] = now
		}
		if lockedAt != "" {
			marks[lockedAnnotation] = lockedAt
		}
		if len(marks) > 0 {
			rec.SetAnnotations(marks)
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
	// A record that lists a config gains the finalizer, and keeps it until
	// released; one being deleted cannot gain it.
	finalize := needsFinalizer(&spec) && rec.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(rec, infrav1.NamespaceCredentialsFinalizer)
	if reflect.DeepEqual(rec.Spec, spec) && rec.GetAnnotations()[revocationPendingAnnotation] == stamp && rec.GetAnnotations()[lockedAnnotation] == lockedAt && !finalize {
		return rec, nil
	}
	rec = rec.DeepCopy()
	if finalize {
		controllerutil.AddFinalizer(rec, infrav1.NamespaceCredentialsFinalizer)
	}
	rec.Spec = spec
	xpmeta.RemoveAnnotations(rec, revocationPendingAnnotation, lockedAnnotation)
	if stamp != "" {
		xpmeta.AddAnnotations(rec, map[string]string{revocationPendingAnnotation: stamp})
	}
	if lockedAt != "" {
		xpmeta.AddAnnotations(rec, map[string]string{lockedAnnotation: lockedAt})
	}
	return rec, errors.Wrap(r.client.Update(ctx, rec), errWriteRecord)
}

// needsFinalizer reports whether a record written with spec must outlive
// its namespace's managed resources: it lists a config they may name. A
// record that never listed one admitted none (the manager's own
// namespace's, a new namespace's), and its namespace goes at once, whether
// the manager runs or not.
func needsFinalizer(spec *infrav1.NamespaceCredentialsSpec) bool {
	return len(spec.Configs) > 0
}

// releaseRecheck is how often a deleted record looks again for the managed
// resources of its namespace that still need it.
const releaseRecheck = 5 * time.Second

// release removes the finalizer of a deleted record once its namespace
// holds no managed resource of an enforced provider the manager may read:
// until then the API server judges their updates (a provider's finalizer
// removal too) with it, and without it would refuse them all. released:
// the record goes.
func (r *Records) release(ctx context.Context, rec *infrav1.NamespaceCredentials) (reconcile.Result, bool, error) {
	if !controllerutil.ContainsFinalizer(rec, infrav1.NamespaceCredentialsFinalizer) {
		return reconcile.Result{}, true, nil
	}
	kinds, err := r.managedKinds(ctx)
	if err != nil {
		return reconcile.Result{}, false, err
	}
	for i := range kinds {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(kinds[i].gvk.GroupVersion().WithKind(kinds[i].gvk.Kind + "List"))
		err := r.managed.List(ctx, l, client.InNamespace(rec.Namespace), client.Limit(1))
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return reconcile.Result{}, false, errors.Wrapf(err, "cannot list %s", kinds[i].gvk.Kind)
		}
		if len(l.Items) > 0 {
			return reconcile.Result{RequeueAfter: releaseRecheck}, false, nil
		}
	}
	rec = rec.DeepCopy()
	controllerutil.RemoveFinalizer(rec, infrav1.NamespaceCredentialsFinalizer)
	if err := r.client.Update(ctx, rec); err != nil {
		res, err := writeResult(client.IgnoreNotFound(err))
		return res, false, err
	}
	return reconcile.Result{}, true, nil
}
