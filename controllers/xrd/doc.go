// Package xrd is the XRD adapter: for each XRD labelled capxp.dev/contract it
// checks the XRD, labels it so that Crossplane copies the contract onto its
// CRD, waits for the CRD and has package xr run a controller for the kind;
// it keeps the hold and release policies and the credentials webhook applied
// for the adapted kinds, and labels CAPXP's own CRDs for CAPI and clusterctl.
package xrd
