package tenancy

// What one reconcile of a namespace's record does, decided from what it
// observed (decide, pure and table-tested in decide_test.go).

import (
	"time"

	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
)

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

// lockedSince is when the record added locks not judged again since; the
// zero time when there are none.
func lockedSince(rec *infrav1.NamespaceCredentials) time.Time {
	if rec == nil {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, rec.GetAnnotations()[lockedAnnotation])
	return t
}

// pendingSince is when the record was marked pending; the zero time when it
// is not, or the mark cannot be read.
func pendingSince(rec *infrav1.NamespaceCredentials) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, rec.GetAnnotations()[revocationPendingAnnotation])
	return t
}

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
