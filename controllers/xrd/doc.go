// Package xrd is the XRD adapter: for each XRD labelled capxp.dev/contract it
// checks the XRD, labels it so that Crossplane copies the contract onto its
// CRD, waits for the CRD and has package xr run a controller for the kind;
// it keeps the hold and release policies and the credentials webhook applied
// for the adapted kinds, and labels CAPXP's own CRDs for CAPI and clusterctl.
//
// One reconcile observes (reconcile.go: the XRD, its CRD, which policy kinds
// the API server serves), decides (decide.go, pure) and acts (reconcile.go).
// It keeps no state of its own: what runs is package xr's Controllers, and
// capxp_xrd_adaptation's series are dropped with the XRD (metrics.go). Its
// condition reasons are API (apis/infrastructure/v1alpha1); its one timing,
// how soon an access it lacks is asked again, is bridge/lifecycle's
// RecheckAccessAfter, shared with the XR reconciler and controllers/access.
//
// Each reconcile also keeps the adapted kinds' admission policies applied
// (gatepolicy.go). Beside it, a small controller of its own: the labels
// CAPXP's own CRDs need when a package manager installed them (owncrds.go).
package xrd
