package lifecycle

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/utils/ptr"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

func TestPath(t *testing.T) {
	cases := map[string]struct {
		reason string
		f      Facts
		want   Path
	}{
		"ExternalFirst": {
			reason: "an externally managed XR is only checked for credentials, deleting, paused or unowned",
			f:      Facts{ExternallyManaged: true, Deleting: true, Paused: true},
			want:   External,
		},
		"DeletingPausedIsAMove": {
			reason: "clusterctl move pauses, then deletes the source's objects",
			f:      Facts{Deleting: true, Paused: true, Owned: true},
			want:   Moved,
		},
		"DeletingBeforeOwner": {
			reason: "a deleted XR is deleted whether or not CAPI still owns it",
			f:      Facts{Deleting: true},
			want:   Deleting,
		},
		"UnownedBeforePaused": {
			reason: "an XR without its owner yet is held on its credentials alone, paused or not",
			f:      Facts{Paused: true},
			want:   Unowned,
		},
		"Paused": {
			reason: "CAPI pauses an owned XR",
			f:      Facts{Owned: true, Paused: true},
			want:   Paused,
		},
		"Active": {
			reason: "owned, neither paused nor deleting",
			f:      Facts{Owned: true},
			want:   Active,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.f.Path(); got != tc.want {
				t.Errorf("%s\nPath() = %s, want %s", tc.reason, got, tc.want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	denied := &verdict.Verdict{Reason: infrav1.CredentialsSecretNotFoundReason, Message: "Secret creds does not exist"}
	forbidden := &verdict.Verdict{Reason: infrav1.ForbiddenReason, Message: "the bridge may not read Secrets"}
	gated := &verdict.Verdict{Reason: infrav1.WaitingForBootstrapDataReason, Message: "waiting"}
	machines := &verdict.Verdict{Reason: infrav1.DeletingReason, Message: "Waiting for 1 Machines to be deleted: m"}
	deniedEvent := Event{Type: "Warning", Reason: infrav1.CredentialsSecretNotFoundReason, Message: "Secret creds does not exist"}
	const recheck = 30 * time.Second
	owned := Facts{Owned: true, Composed: true, Finalizer: true, Reselects: true}

	cases := map[string]struct {
		reason string
		o      Observed
		want   Plan
	}{
		"ExternalDeletingLetsGo": {
			reason: "an externally managed XR being deleted loses the bridge's finalizer and pause: Crossplane checks the pause before a deletion",
			o:      Observed{Facts: Facts{ExternallyManaged: true, Deleting: true, Finalizer: true}},
			want:   Plan{Path: External, Before: Edit{Pause: PauseLift, Finalizer: FinalizerRemove}},
		},
		"ExternalGrantedKeepsItsPause": {
			reason: "granted, what it composed resumes and the XR's pause follows CAPI's annotation",
			o:      Observed{Facts: Facts{ExternallyManaged: true, Paused: true}},
			want:   Plan{Path: External, Before: Edit{Finalizer: FinalizerRemove}, Composed: Composed{Hold: Off}, After: Edit{Pause: PauseSet}},
		},
		"ExternalDeniedHeld": {
			reason: "denied, it is held with what it composed, and an event says why; a missing Secret is read again later",
			o:      Observed{Facts: Facts{ExternallyManaged: true}, Denied: denied, DeniedRecheck: recheck},
			want: Plan{Path: External, Before: Edit{Pause: PauseHold, Finalizer: FinalizerRemove}, Composed: Composed{Hold: On},
				Events: []Event{deniedEvent}, RequeueAfter: recheck},
		},
		"MovedLeavesEverything": {
			reason: "the move's source keeps Crossplane off what now belongs to the target, and acts on nothing",
			o:      Observed{Facts: Facts{Deleting: true, Paused: true, Owned: true, Finalizer: true, Composed: true}, Own: []string{"Bucket/a"}},
			want:   Plan{Path: Moved, Before: Edit{Pause: PauseSet}},
		},
		"DeletingWithoutFinalizer": {
			reason: "without the bridge's finalizer there is nothing of the bridge's to do but release the pause",
			o:      Observed{Facts: Facts{Deleting: true}},
			want:   Plan{Path: Deleting, Before: Edit{Pause: PauseLift}},
		},
		"DeletingWaitsForMachines": {
			reason: "what the contract says must go first goes first; nothing is deleted meanwhile",
			o:      Observed{Facts: Facts{Deleting: true, Finalizer: true, Owned: true}, WaitBeforeDelete: machines, Own: []string{"Bucket/a"}},
			want:   Plan{Path: Deleting, Before: Edit{Pause: PauseLift}, Verdict: machines},
		},
		"DeletingWaitsForComposed": {
			reason: "what it controls is deleted, and the XR waits for it",
			o:      Observed{Facts: Facts{Deleting: true, Finalizer: true, Owned: true}, Own: []string{"Bucket/a", "Bucket/b"}},
			want: Plan{Path: Deleting, Before: Edit{Pause: PauseLift}, Composed: Composed{Hold: Off, Delete: true},
				Verdict: &verdict.Verdict{Reason: infrav1.DeletingReason, Message: "Waiting for 2 composed resources to be deleted: Bucket/a, Bucket/b"}},
		},
		"DeletingDeniedStaysHeld": {
			reason: "revoked credentials keep what it composed paused; the wait says a grant lets the deletion go on",
			o:      Observed{Facts: Facts{Deleting: true, Finalizer: true, Owned: true}, Own: []string{"Bucket/a"}, Denied: denied, DeniedRecheck: recheck},
			want: Plan{Path: Deleting, Before: Edit{Pause: PauseLift}, Composed: Composed{Hold: On, Delete: true}, RequeueAfter: recheck,
				Verdict: &verdict.Verdict{Reason: infrav1.DeletingReason, Message: "Waiting for 1 composed resources to be deleted: Bucket/a, which stay paused until a grant lets the provider delete them with the XR's credentials: Secret creds does not exist"}},
		},
		"DeletingForeignWhileWaiting": {
			reason: "what it names but does not control is said with an event, since the wait's verdict replaces it",
			o:      Observed{Facts: Facts{Deleting: true, Finalizer: true, Owned: true}, Own: []string{"Bucket/a"}, Foreign: []string{"Bucket/theirs"}},
			want: Plan{Path: Deleting, Before: Edit{Pause: PauseLift}, Composed: Composed{Hold: Off, Delete: true},
				Events:  []Event{{Type: "Warning", Reason: infrav1.NotControlledReason, Message: "Not deleting Bucket/theirs: spec.crossplane.resourceRefs names them but this composite resource does not control them"}},
				Verdict: &verdict.Verdict{Reason: infrav1.DeletingReason, Message: "Waiting for 1 composed resources to be deleted: Bucket/a"}},
		},
		"DeletedForeignOwned": {
			reason: "with nothing of its own left it is let go; the owner's verdict names what it did not delete",
			o:      Observed{Facts: Facts{Deleting: true, Finalizer: true, Owned: true}, Foreign: []string{"Bucket/theirs"}},
			want: Plan{Path: Deleting, Before: Edit{Pause: PauseLift}, Composed: Composed{Hold: Off, Delete: true}, After: Edit{Finalizer: FinalizerRemove}, Forget: true,
				Verdict: &verdict.Verdict{Reason: infrav1.NotControlledReason, Message: "Not deleting Bucket/theirs: spec.crossplane.resourceRefs names them but this composite resource does not control them"}},
		},
		"DeletedForeignUnowned": {
			reason: "no owner shows the verdict: the event says it",
			o:      Observed{Facts: Facts{Deleting: true, Finalizer: true}, Foreign: []string{"Bucket/theirs"}},
			want: Plan{Path: Deleting, Before: Edit{Pause: PauseLift}, Composed: Composed{Hold: Off, Delete: true}, After: Edit{Finalizer: FinalizerRemove}, Forget: true,
				Events:  []Event{{Type: "Warning", Reason: infrav1.NotControlledReason, Message: "Not deleting Bucket/theirs: spec.crossplane.resourceRefs names them but this composite resource does not control them"}},
				Verdict: &verdict.Verdict{Reason: infrav1.NotControlledReason, Message: "Not deleting Bucket/theirs: spec.crossplane.resourceRefs names them but this composite resource does not control them"}},
		},
		"UnownedLeftAlone": {
			reason: "granted, with no wish of the contract: the pause is left as it is",
			o:      Observed{Facts: Facts{}},
			want:   Plan{Path: Unowned, Composed: Composed{Hold: Off}},
		},
		"UnownedContractPauses": {
			reason: "the contract pauses an XR that composed nothing and has no owner yet",
			o:      Observed{Facts: Facts{PauseUnowned: ptr.To(true)}},
			want:   Plan{Path: Unowned, Composed: Composed{Hold: Off}, After: Edit{Pause: PauseSet}},
		},
		"UnownedHoldLifted": {
			reason: "the bridge lifts its own hold once the credentials may be used",
			o:      Observed{Facts: Facts{HeldForCredentials: true, CrossplanePaused: true}},
			want:   Plan{Path: Unowned, Composed: Composed{Hold: Off}, After: Edit{Pause: PauseLift}},
		},
		"UnownedDenied": {
			reason: "denied, an XR without its owner is held all the same: Crossplane composes it all the same",
			o:      Observed{Facts: Facts{PauseUnowned: ptr.To(false)}, Denied: denied},
			want:   Plan{Path: Unowned, Before: Edit{Pause: PauseHold}, Composed: Composed{Hold: On}, Events: []Event{deniedEvent}},
		},
		"PausedNotForMove": {
			reason: "CAPI's pause is carried to Crossplane; with no move waiting nothing else happens",
			o:      Observed{Facts: Facts{Owned: true, Paused: true, Composed: true}},
			want:   Plan{Path: Paused, Before: Edit{Pause: PauseSet, Finalizer: FinalizerAdd}},
		},
		"PausedDenied": {
			reason: "credentials revoked while paused still stop what it composed; the owner's verdict stays",
			o:      Observed{Facts: Facts{Owned: true, Paused: true, BlockMove: true}, Denied: denied},
			want:   Plan{Path: Paused, Before: Edit{Pause: PauseSet}, Composed: Composed{Hold: On}},
		},
		"PausedMoveUnacknowledged": {
			reason: "the pause is written with this reconcile: kinds are labelled, guards wait for Crossplane's acknowledgement",
			o:      Observed{Facts: Facts{Owned: true, Paused: true, Composed: true, BlockMove: true}},
			want:   Plan{Path: Paused, Before: Edit{Pause: PauseSet, Finalizer: FinalizerAdd}, Composed: Composed{LabelCRDs: true}},
		},
		"PausedMoveGuarded": {
			reason: "acknowledged, every composed resource is guarded, then the block-move annotation goes",
			o:      Observed{Facts: Facts{Owned: true, Paused: true, Composed: true, BlockMove: true, CrossplanePaused: true, PauseAcknowledged: true}},
			want: Plan{Path: Paused, Before: Edit{Pause: PauseSet, Finalizer: FinalizerAdd}, Composed: Composed{LabelCRDs: true, Guard: true},
				After: Edit{DropBlockMove: true}},
		},
		"ActiveGated": {
			reason: "the contract's gate keeps it paused and says why; the finalizer comes with what it composed",
			o:      Observed{Facts: owned, Gate: gated},
			want:   Plan{Path: Active, Before: Edit{Pause: PauseSet, Finalizer: FinalizerAdd}, Verdict: gated},
		},
		"ActiveForbidden": {
			reason: "a grant to the bridge changes no object it watches: look again",
			o:      Observed{Facts: Facts{Owned: true}, Gate: forbidden},
			want:   Plan{Path: Active, Before: Edit{Pause: PauseSet}, Verdict: forbidden, RequeueAfter: RecheckAccessAfter},
		},
		"ActiveDenied": {
			reason: "denied, it is held, what it composed too, and the owner says why",
			o:      Observed{Facts: owned, Denied: denied, DeniedRecheck: recheck},
			want: Plan{Path: Active, Before: Edit{Pause: PauseHold, Finalizer: FinalizerAdd}, Composed: Composed{Hold: On},
				Verdict: denied, RequeueAfter: recheck},
		},
		"ActiveOpen": {
			reason: "open and granted: the hold goes, the Composition is checked, the XR is Crossplane's and its contract mapped",
			o:      Observed{Facts: owned},
			want: Plan{Path: Active, Before: Edit{Finalizer: FinalizerAdd}, Composed: Composed{Hold: Off}, Reselect: true,
				After: Edit{Pause: PauseLift, Finalizer: FinalizerAdd}, Map: true},
		},
		"ActiveAfterPauseUnguards": {
			reason: "an XR read paused (after a move, a pause or a hold) loses its guards before it is unpaused; a machine's Composition is not re-selected",
			o:      Observed{Facts: Facts{Owned: true, CrossplanePaused: true, HeldForCredentials: true}},
			want: Plan{Path: Active, Composed: Composed{Unguard: true, Hold: Off},
				After: Edit{Pause: PauseLift, Finalizer: FinalizerAdd}, Map: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Decide(tc.o), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nDecide: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
