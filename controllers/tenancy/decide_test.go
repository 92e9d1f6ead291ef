package tenancy

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
)

// What one reconcile of a namespace's record does, decided from what it
// observed: nothing is admitted before it is locked and judged again, what
// is no longer listed is refused before what uses it is paused, and a lock
// goes only once the revocation has settled.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	a := infrav1.UsableConfig{APIGroup: "creds.test", Kind: infrav1.ProviderConfigKindCluster, Name: "a"}
	b := infrav1.UsableConfig{APIGroup: "creds.test", Kind: infrav1.ProviderConfigKindNamespaced, Name: "b"}
	lockB := []infrav1.LockedObject{{APIGroup: "creds.test", Kind: "ProviderConfig", Name: "b"}, {Kind: "Secret", Name: "b"}}
	spec := func(locked []infrav1.LockedObject, configs ...infrav1.UsableConfig) infrav1.NamespaceCredentialsSpec {
		return infrav1.NamespaceCredentialsSpec{Configs: configs, Locked: locked}
	}
	record := func(s infrav1.NamespaceCredentialsSpec, pendingFor time.Duration) *infrav1.NamespaceCredentials {
		rec := &infrav1.NamespaceCredentials{Spec: s}
		if pendingFor != 0 {
			rec.Annotations = map[string]string{revocationPendingAnnotation: now.Add(-pendingFor).Format(time.RFC3339Nano)}
		}
		return rec
	}
	ptr := func(s infrav1.NamespaceCredentialsSpec) *infrav1.NamespaceCredentialsSpec { return &s }
	after := func(d time.Duration) reconcile.Result { return reconcile.Result{RequeueAfter: d} }
	unreadable := errors.New("cannot list ProviderConfigs creds.test: the server is currently unable to handle the request")

	cases := map[string]struct {
		o    observed
		want plan
	}{
		"the configs cannot be judged: only what the grants give and take, the rescan kept": {
			o:    observed{rec: record(spec(nil, a), 0), judgeErr: unreadable, rescan: true},
			want: plan{keepRescan: true, grantsOnly: true, err: unreadable},
		},
		"a config judged for the first time: locked first, judged again once the lock is in force": {
			o:    observed{rec: record(spec(nil, a), 0), spec: spec(lockB, a, b)},
			want: plan{grantsOnly: true, locks: lockB, result: after(lockSettles)},
		},
		"no record yet: written pending, what names anything else paused, written again once settled": {
			o:    observed{spec: spec(nil, a)},
			want: plan{interim: ptr(spec(nil, a)), revoke: ptr(spec(nil, a)), result: after(revocationSettles)},
		},
		"it admits more and refuses nothing new: written, and what the bridge paused resumes": {
			o:    observed{rec: record(spec(lockB, b), 0), spec: spec(lockB, a, b)},
			want: plan{final: ptr(spec(lockB, a, b)), resume: true},
		},
		"it admits more while a marked resource changed: handled as a revocation": {
			o:    observed{rec: record(spec(lockB, b), 0), spec: spec(lockB, a, b), rescan: true},
			want: plan{interim: ptr(spec(lockB, a, b)), revoke: ptr(spec(lockB, a, b)), result: after(revocationSettles)},
		},
		"a config revoked: refused at once, what uses it paused, its locks kept until settled": {
			o:    observed{rec: record(spec(lockB, a, b), 0), spec: spec(nil, a)},
			want: plan{interim: ptr(spec(lockB, a)), revoke: ptr(spec(nil, a)), result: after(revocationSettles)},
		},
		"a revocation settling: nothing paused again yet": {
			o:    observed{rec: record(spec(lockB, a), time.Second), spec: spec(nil, a), now: now},
			want: plan{interim: ptr(spec(lockB, a)), result: after(revocationSettles - time.Second)},
		},
		"a revocation settled: paused once more, then unlocked": {
			o:    observed{rec: record(spec(lockB, a), 3*time.Second), spec: spec(nil, a), now: now},
			want: plan{interim: ptr(spec(lockB, a)), revoke: ptr(spec(nil, a)), final: ptr(spec(nil, a))},
		},
		"a pending mark that cannot be read: settled long ago": {
			o: observed{rec: &infrav1.NamespaceCredentials{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{revocationPendingAnnotation: "soon"}}, Spec: spec(nil, a)},
				spec: spec(nil, a), now: now},
			want: plan{interim: ptr(spec(nil, a)), revoke: ptr(spec(nil, a)), final: ptr(spec(nil, a))},
		},
		"nothing changed: written (a lock mark cleared, the finalizer added), nothing paused": {
			o:    observed{rec: record(spec(lockB, a, b), 0), spec: spec(lockB, a, b)},
			want: plan{final: ptr(spec(lockB, a, b))},
		},
		"nothing changed, a marked resource did: scanned": {
			o:    observed{rec: record(spec(nil, a), 0), spec: spec(nil, a), rescan: true},
			want: plan{revoke: ptr(spec(nil, a)), final: ptr(spec(nil, a))},
		},
		"a Secret missing, one unreadable, reads spent: back at the soonest": {
			o:    observed{rec: record(spec(nil, a), 0), spec: spec(nil, a), judged: judgement{missing: true, failed: true, unread: 3 * time.Second}},
			want: plan{final: ptr(spec(nil, a)), result: after(3 * time.Second)},
		},
		"a Secret missing: looked for again": {
			o:    observed{rec: record(spec(nil, a), 0), spec: spec(nil, a), judged: judgement{missing: true}},
			want: plan{final: ptr(spec(nil, a)), result: after(credentials.RecheckSecretAfter)},
		},
		"a Secret unreadable while a revocation settles: back when it settles": {
			o:    observed{rec: record(spec(lockB, a, b), 0), spec: spec(nil, a), judged: judgement{failed: true}},
			want: plan{interim: ptr(spec(lockB, a)), revoke: ptr(spec(nil, a)), result: after(revocationSettles)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := decide(tc.o)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(plan{}), cmp.Comparer(errors.Is)); diff != "" {
				t.Errorf("decide(): -want +got:\n%s", diff)
			}
		})
	}
}

// Whatever the record and the judgement, a plan never lets a config go
// from the record before what uses it is paused: what the record listed and
// no longer may is written pending first and paused, its locks kept; nothing
// is listed before it is locked; and a judgement that failed changes only
// what the grants give.
func FuzzDecide(f *testing.F) {
	f.Add(uint8(0b011), uint8(0b001), uint8(0b10), uint8(0b00), int64(0), false, false, uint8(0))
	f.Add(uint8(0b001), uint8(0b011), uint8(0b00), uint8(0b10), int64(3e9), true, false, uint8(1))
	f.Add(uint8(0b111), uint8(0b000), uint8(0b11), uint8(0b00), int64(1e9), false, true, uint8(2))
	f.Fuzz(func(t *testing.T, had, has, hadLocks, hasLocks uint8, pendingFor int64, rescan, failed bool, shape uint8) {
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		configs := func(bits uint8) []infrav1.UsableConfig {
			var out []infrav1.UsableConfig
			for i := range 3 {
				if bits&(1<<i) != 0 {
					out = append(out, infrav1.UsableConfig{APIGroup: "creds.test", Kind: infrav1.ProviderConfigKindNamespaced, Name: string(rune('a' + i))})
				}
			}
			return out
		}
		locks := func(bits uint8) []infrav1.LockedObject {
			var out []infrav1.LockedObject
			for i := range 2 {
				if bits&(1<<i) != 0 {
					out = append(out, infrav1.LockedObject{Kind: "Secret", Name: string(rune('a' + i))})
				}
			}
			return out
		}
		o := observed{spec: infrav1.NamespaceCredentialsSpec{Configs: configs(has), Locked: locks(hasLocks)}, rescan: rescan, now: now,
			judged: judgement{failed: failed}}
		if shape%3 != 0 {
			o.rec = &infrav1.NamespaceCredentials{Spec: infrav1.NamespaceCredentialsSpec{Configs: configs(had), Locked: locks(hadLocks)}}
			if pendingFor != 0 {
				o.rec.Annotations = map[string]string{revocationPendingAnnotation: now.Add(-time.Duration(pendingFor)).Format(time.RFC3339Nano)}
			}
		}
		if shape%3 == 2 {
			o.judgeErr = errors.New("unreadable")
		}
		p := decide(o)
		switch {
		case o.judgeErr != nil:
			if !p.grantsOnly || p.err == nil || p.keepRescan != rescan {
				t.Fatalf("a judgement that failed: %+v", p)
			}
			return
		case len(newLocks(o.rec, o.spec.Locked)) > 0:
			if !p.grantsOnly || len(p.locks) == 0 || p.final != nil || p.interim != nil {
				t.Fatalf("new locks must be written before anything is listed: %+v", p)
			}
			return
		case p.grantsOnly:
			t.Fatalf("nothing to lock, judged: %+v", p)
		}
		if p.final == nil && p.interim == nil {
			t.Fatalf("nothing written: %+v", p)
		}
		removed := o.rec == nil || credentials.Removed(&o.rec.Spec, &o.spec)
		if removed && o.rec != nil && !revocationPending(o.rec) && (p.interim == nil || p.revoke == nil) {
			t.Fatalf("what the record no longer lists must be refused, then paused: %+v", p)
		}
		if p.interim != nil {
			if !credentials.SameUse(p.interim, &o.spec) {
				t.Fatalf("the interim record admits %v, want %v", p.interim.Configs, o.spec.Configs)
			}
			if o.rec != nil {
				for _, l := range o.rec.Spec.Locked {
					if !slices.Contains(p.interim.Locked, l) {
						t.Fatalf("lock %v dropped before the revocation settled", l)
					}
				}
			}
		}
		if p.final != nil && p.interim != nil && p.revoke == nil {
			t.Fatalf("unlocked without pausing once more: %+v", p)
		}
	})
}
