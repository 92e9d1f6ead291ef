// Package lifecycle decides what one reconcile does with an adapted XR and
// with what it composed: which path it takes (CAPI's order: externally
// managed, deleting, unowned, paused, active), whether Crossplane may
// reconcile it, the bridge's finalizer, the credentials' hold, the guards of
// clusterctl move, the deletion of the composed resources, and the verdict
// and events that say so. It is a pure function from what was observed to a
// Plan; the controllers observe, call Decide, and act on the plan in its
// order.
//
// What an active XR's contract maps to (its outputs, Crossplane's
// readiness, the provisioned milestone) is the contract package's to
// decide; the plan says only when to map it.
package lifecycle

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/contract"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

// RecheckAccessAfter is how soon an XR held because the bridge may not read
// what it needs is looked at again: a grant changes no object the bridge
// watches.
const RecheckAccessAfter = 15 * time.Second

// Path is the way one reconcile of an XR goes.
type Path string

// The paths, in the order CAPI's reconcilers take them.
const (
	// External: the XR is externally managed; its contract fields are
	// another system's, its credentials still the bridge's to check.
	External Path = "ExternallyManaged"
	// Moved: deleting while CAPI pauses it, as clusterctl move does to the
	// source: what it composed belongs to the target by then.
	Moved Path = "DeletingPaused"
	// Deleting: what it composed goes, then the XR.
	Deleting Path = "Deleting"
	// Unowned: CAPI has not set its owner reference yet.
	Unowned Path = "Unowned"
	// Paused: CAPI pauses it or its Cluster.
	Paused Path = "Paused"
	// Active: the contract is mapped.
	Active Path = "Active"
)

// Facts are what a reconcile read of the XR and its owner, before anything
// else: they choose the path, and so what else to observe.
type Facts struct {
	// Deleting: the XR has a deletion timestamp.
	Deleting bool
	// ExternallyManaged: the XR carries CAPI's externally managed
	// annotation.
	ExternallyManaged bool
	// Owned: the XR's CAPI owner exists.
	Owned bool
	// Paused: CAPI pauses the XR or its Cluster. For an externally managed
	// XR, only its own annotation counts.
	Paused bool
	// Finalizer: the XR carries the bridge's finalizer.
	Finalizer bool
	// Composed: the XR references resources it composed.
	Composed bool
	// CrossplanePaused: the XR was read with crossplane.io/paused.
	CrossplanePaused bool
	// PauseAcknowledged: Crossplane reported the XR's pause (Synced,
	// ReconcilePaused).
	PauseAcknowledged bool
	// HeldForCredentials: the XR was read held by the bridge for its
	// credentials.
	HeldForCredentials bool
	// BlockMove: the XR carries clusterctl's block-move annotation.
	BlockMove bool
	// Reselects: the contract re-selects the Composition of an XR whose
	// compositionSelector changed.
	Reselects bool
	// PauseUnowned is the contract's wish for the pause of an XR without
	// its owner yet; nil leaves the pause as it is.
	PauseUnowned *bool
}

// Path chooses the way the reconcile goes.
func (f Facts) Path() Path {
	switch {
	case f.ExternallyManaged:
		return External
	case f.Deleting && f.Paused:
		return Moved
	case f.Deleting:
		return Deleting
	case !f.Owned:
		return Unowned
	case f.Paused:
		return Paused
	}
	return Active
}

// Observed is what the path needed read besides the facts. Each path reads
// only what it decides on: the contract's gate and then, once it is open,
// the credentials (Active); what must go first and then, once nothing must,
// the credentials (Deleting); the credentials alone (External, Unowned,
// Paused); nothing (Moved).
type Observed struct {
	Facts
	// Gate is the contract's reason to keep an active XR paused; nil
	// when open.
	Gate *verdict.Verdict
	// Denied is why the XR's credentials may not be used; nil when they
	// may (or were not read).
	Denied *verdict.Verdict
	// DeniedRecheck is when to read the credentials again while denied
	// (a missing Secret, which the bridge does not watch).
	DeniedRecheck time.Duration
	// WaitBeforeDelete names what must go before what the XR composed;
	// nil when nothing.
	WaitBeforeDelete *verdict.Verdict
	// Own are the resources the XR controls that still exist (Kind/name,
	// sorted); Foreign the references it does not control.
	Own, Foreign []string
}

// Pause is what becomes of the XR's crossplane.io/paused.
type Pause int

const (
	// PauseLeave leaves it.
	PauseLeave Pause = iota
	// PauseSet sets it, for CAPI or the contract's gate.
	PauseSet
	// PauseHold sets it marked as the credentials' hold, which the
	// bridge alone lifts.
	PauseHold
	// PauseLift removes it and any hold.
	PauseLift
)

// Finalizer is what becomes of the bridge's finalizer on the XR.
type Finalizer int

const (
	// FinalizerLeave leaves it.
	FinalizerLeave Finalizer = iota
	// FinalizerAdd adds it.
	FinalizerAdd
	// FinalizerRemove removes it.
	FinalizerRemove
)

// Edit changes the XR's metadata.
type Edit struct {
	Pause     Pause
	Finalizer Finalizer
	// DropBlockMove removes clusterctl's block-move annotation.
	DropBlockMove bool
}

// Toggle turns something on, off, or leaves it.
type Toggle int

const (
	// Leave leaves it.
	Leave Toggle = iota
	// On turns it on.
	On
	// Off turns it off.
	Off
)

// Composed is what is done to the resources the XR composed, in this
// order.
type Composed struct {
	// Unguard removes the move guards a pause or a move left.
	Unguard bool
	// Hold pauses them for the credentials (On), or lifts that hold.
	Hold Toggle
	// LabelCRDs gives their kinds' CRDs clusterctl's label.
	LabelCRDs bool
	// Guard guards them for clusterctl move.
	Guard bool
	// Delete deletes those the XR controls.
	Delete bool
}

// Event is recorded on the XR once the writes succeed.
type Event struct {
	Type, Reason, Message string
}

// Plan is what one reconcile does, in this order: Before edits the working
// copy of the XR; Composed acts on what it composed; once those succeed,
// Reselect and After; then, when Map, the contract is mapped. A plan that
// holds edits before it acts, and releases only after: a failed act leaves
// the XR held.
type Plan struct {
	Path     Path
	Before   Edit
	Composed Composed
	// Reselect checks the Composition against a changed selector, for a
	// contract that re-selects.
	Reselect bool
	After    Edit
	// Map maps the contract: outputs, readiness, the milestone.
	Map bool
	// Verdict goes to the owner's condition; nil leaves it.
	Verdict *verdict.Verdict
	Events  []Event
	// Forget drops what the bridge remembers of the XR and its owner: it
	// lets go of the XR.
	Forget bool
	// RequeueAfter is when to look again without an event.
	RequeueAfter time.Duration
}

// Decide plans one reconcile of an XR from what was observed.
func Decide(o Observed) Plan {
	p := Plan{Path: o.Path()}
	switch p.Path {
	case External:
		// The bridge lets go of an XR it held before the annotation
		// was added; Crossplane checks the pause before it handles a
		// deletion.
		p.Before.Finalizer = FinalizerRemove
		if o.Deleting {
			p.Before.Pause = PauseLift
			return p
		}
		return unlessGranted(p, o, &o.Paused)
	case Moved:
		// clusterctl move pauses a cluster, then deletes the source's
		// objects: leave what they composed, and keep Crossplane off
		// it too.
		p.Before.Pause = PauseSet
		return p
	case Deleting:
		return deleting(p, o)
	case Unowned:
		// Crossplane composes it all the same: its credentials are
		// checked all the same.
		return unlessGranted(p, o, o.PauseUnowned)
	}
	// The finalizer guards what Crossplane composed: an XR that composed
	// something gets it now, one still held gets it with the patch that
	// unpauses it, so a gated machine costs no write of its own for it.
	if o.Composed {
		p.Before.Finalizer = FinalizerAdd
	}
	if p.Path == Paused {
		return paused(p, o)
	}
	return active(p, o)
}

// unlessGranted holds an XR that no CAPI object speaks for (one without its
// owner yet, one externally managed) while its credentials may not be used,
// what it composed too, with an event; once they may, what it composed
// resumes, and the XR's pause becomes want (nil leaves it, but lifts the
// bridge's own hold).
func unlessGranted(p Plan, o Observed, want *bool) Plan {
	if o.Denied != nil {
		p.Before.Pause = PauseHold
		p.Composed.Hold = On
		p.Events = append(p.Events, event(*o.Denied))
		p.RequeueAfter = o.DeniedRecheck
		return p
	}
	// Whether or not the XR stays paused: a release decided on a read of
	// its composed resources older than the hold lifts the XR's pause and
	// leaves theirs, and their watch brings the XR back when the newer
	// read arrives.
	p.Composed.Hold = Off
	switch {
	case want != nil && *want:
		p.After.Pause = PauseSet
	case want != nil, o.HeldForCredentials:
		p.After.Pause = PauseLift
	}
	return p
}

// deleting deletes every resource the XR composed (and controls) and holds
// the XR until they are gone: Crossplane v2 leaves them to the garbage
// collector, which would act only once the XR is gone. The contract may
// name what must go first. The XR is released to Crossplane, which checks
// its pause before it handles a deletion, so that its finalizer goes too.
func deleting(p Plan, o Observed) Plan {
	p.Before.Pause = PauseLift
	if !o.Finalizer {
		return p
	}
	if o.WaitBeforeDelete != nil {
		p.Verdict = o.WaitBeforeDelete
		return p
	}
	// Their provider deletes them with the XR's credentials: where the
	// namespace may no longer use them, they stay held, and a new grant
	// lets the deletion go on.
	p.Composed.Hold = Off
	if o.Denied != nil {
		p.Composed.Hold = On
	}
	p.Composed.Delete = true
	if len(o.Foreign) > 0 {
		v := verdict.NotReady(infrav1.NotControlledReason,
			"Not deleting %s: spec.crossplane.resourceRefs names them but this composite resource does not control them", contract.List(o.Foreign))
		if !o.Owned || len(o.Own) > 0 {
			// The verdict's change is the event when an owner shows it
			// and no wait below replaces it.
			p.Events = append(p.Events, event(v))
		}
		p.Verdict = &v
	}
	if len(o.Own) > 0 {
		msg := contract.Waiting("composed resources", o.Own)
		if o.Denied != nil {
			msg += ", which stay paused until a grant lets the provider delete them with the XR's credentials: " + o.Denied.Message
		}
		p.Verdict = &verdict.Verdict{Reason: infrav1.DeletingReason, Message: msg}
		p.RequeueAfter = o.DeniedRecheck
		return p
	}
	p.After.Finalizer = FinalizerRemove
	p.Forget = true
	return p
}

// paused carries CAPI's pause to Crossplane. The owner's verdict and the
// milestone stay as they are. Credentials revoked meanwhile still stop what
// it composed; otherwise it is readied for clusterctl move, which pauses
// first: once Crossplane has acknowledged the pause (so that it composes
// nothing more), every resource it composed is guarded, then the XR loses
// its block-move annotation. Until the guards are set, the annotation
// stays, and move waits.
func paused(p Plan, o Observed) Plan {
	p.Before.Pause = PauseSet
	if o.Denied != nil {
		p.Composed.Hold = On
		return p
	}
	if !o.BlockMove {
		return p
	}
	p.Composed.LabelCRDs = true
	if o.CrossplanePaused && o.PauseAcknowledged {
		p.Composed.Guard = true
		p.After.DropBlockMove = true
	}
	return p
}

// active opens the way to composition (the contract's gate, then the
// credentials) and maps the contract.
func active(p Plan, o Observed) Plan {
	if o.Gate != nil {
		p.Before.Pause = PauseSet
		p.Verdict = o.Gate
		if o.Gate.Reason == infrav1.ForbiddenReason {
			p.RequeueAfter = RecheckAccessAfter
		}
		return p
	}
	if o.Denied != nil {
		p.Before.Pause = PauseHold
		p.Verdict = o.Denied
		p.Composed.Hold = On
		p.RequeueAfter = o.DeniedRecheck
		return p
	}
	// Guards a pause or a move left go before the XR is Crossplane's
	// again, and what the bridge held for credentials resumes, whether or
	// not the XR is still paused (see unlessGranted); while they cannot,
	// it stays as it was.
	p.Composed.Unguard = o.CrossplanePaused
	p.Composed.Hold = Off
	p.Reselect = o.Reselects
	p.After.Pause = PauseLift
	p.After.Finalizer = FinalizerAdd
	p.Map = true
	return p
}

func event(v verdict.Verdict) Event {
	t := corev1.EventTypeNormal
	if v.Warning() {
		t = corev1.EventTypeWarning
	}
	return Event{Type: t, Reason: v.Reason, Message: v.Message}
}
