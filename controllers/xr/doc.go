// Package xr is the XR reconciler: one controller per adapted XR kind,
// started and stopped as the XRD adapter decides (Controllers), each
// reconcile observe → decide → act. It observes an XR, its CAPI owner and
// what it composed; asks package bridge what that means for CAPI's contract
// and for the XR's life cycle; and acts on what it composed, then writes the
// XR, its contract status and its owner's condition once, each only when it
// changes. What it remembers of each XR between reconciles is its memory,
// forgotten when the XR goes.
package xr
