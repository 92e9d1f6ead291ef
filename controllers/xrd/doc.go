// Package xrd is the XRD adapter: for each XRD labelled capxp.dev/contract it
// checks the XRD, labels it so that Crossplane copies the contract onto its
// CRD, waits for the CRD and has package xr run a controller for the kind;
// it keeps the hold and release policies and the credentials webhook applied
// for the adapted kinds, and labels CAPXP's own CRDs for CAPI and clusterctl.
//
// One reconcile observes (reconcile.go: the XRD, its CRD, which policy kinds
// the API server serves), decides (decide.go, pure) and acts (reconcile.go).
// It keeps no state of its own: what runs is package xr's Controllers, and
// capxp_xrd_adaptation's series are dropped with the XRD (metrics.go).
package xrd
