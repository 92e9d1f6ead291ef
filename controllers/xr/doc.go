// Package xr is the XR reconciler: one controller per adapted XR kind,
// started and stopped as the XRD adapter decides (controllers.go), each
// reconcile observe → decide → act (xr.go). It observes an XR, its CAPI owner
// and what it composed; asks package bridge what that means for CAPI's
// contract and for the XR's life cycle; and acts on what it composed, then
// writes the XR, its contract status and its owner's condition once, each
// only when it changes (write.go). What it remembers of each XR between
// reconciles is its memory (memory.go), forgotten when the XR goes.
//
// Where a behaviour lives, outside this package: what each contract reads,
// injects and maps (the outputs copied into the XR's spec, the milestone, the
// owner's condition type) is controllers/contracts, one file per contract,
// with the pure mapping of outputs in bridge/outputs; the verdict on an XR
// (Crossplane's readiness against the contract) is bridge/contract and
// bridge/readiness; the life cycle (pause, hold, deletion order) is
// bridge/lifecycle; condition reasons, labels and annotations that are API
// are apis/infrastructure/v1alpha1. This package's own timings are in xr.go
// (conflictRequeue) and bridge/lifecycle (RecheckAccessAfter, shared with the
// XRD adapter).
package xr
