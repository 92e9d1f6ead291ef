// Package xr is the XR reconciler: one controller per adapted XR kind,
// started and stopped as the XRD adapter decides (controllers.go), each
// reconcile observe → decide → act (xr.go). It observes an XR, its CAPI owner
// and what it composed; asks package bridge what that means for CAPI's
// contract and for the XR's life cycle; and acts on what it composed, then
// writes the XR, its contract status and its owner's condition once, each
// only when it changes (write.go). What it remembers of each XR between
// reconciles is its memory (memory.go), forgotten when the XR goes.
//
// State, each piece with its lifetime:
//   - memory (memory.go): per XR and owner, one kind's, until the XR is let
//     go or gone;
//   - composed (controllers/composed): what one kind's XRs composed and the
//     watches on it, until the kind's controller stops;
//   - waiting (metrics.go): the XRs CAPI waits for, of every kind, held by
//     Controllers for the manager's life; an XR leaves it when it stops
//     waiting or is forgotten, a kind's XRs when its controller stops;
//   - crdLabels (move.go): the CRDs labelled for clusterctl move and each
//     group version's categories, held by Controllers for the manager's
//     life;
//   - access (controllers/access): what the manager may read, the
//     manager's, asked again after bridge/lifecycle's RecheckAccessAfter.
//
// Nothing is a package variable but prometheus' counters.
//
// Where a behaviour lives, outside this package: which outputs map onto
// which contract fields, and how each is checked, is bridge/outputs (pure,
// one file per contract); what each contract reads and injects, its
// milestone and its owner's condition type are controllers/contracts, one
// file per contract; the verdict on an XR
// (Crossplane's readiness against the contract) is bridge/contract and
// bridge/readiness; the life cycle (pause, hold, deletion order) is
// bridge/lifecycle; condition reasons, labels and annotations that are API
// are apis/infrastructure/v1alpha1. This package's own timings are in xr.go
// (conflictRequeue) and bridge/lifecycle (RecheckAccessAfter, shared with the
// XRD adapter).
package xr
