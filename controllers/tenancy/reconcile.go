package tenancy

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
)

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

// revocationSettles is how long after a record stops listing a config the
// bridge pauses what names it once more, and only then unlocks it.
const revocationSettles = 2 * time.Second

// unreadableRecheck is how soon a Secret that could not be read is read
// again; its config is refused meanwhile.
const unreadableRecheck = 10 * time.Second

// revocationPendingAnnotation marks a record written before the managed
// resources that use what it no longer lists were paused: the next
// reconcile, of this manager or the next, pauses them.
const revocationPendingAnnotation = "capxp.dev/revocation-pending"

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
