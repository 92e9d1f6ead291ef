// Package controllers sets up CAPXP's manager: the scheme, the clients and
// their rate limits, and the reconcilers, each in a package of its own:
//
//   - xrd adapts every XRD that declares a CAPI contract, keeps the
//     admission objects of the adapted kinds applied, and has xr run a
//     controller per adapted kind;
//   - xr reconciles each XR as observe → decide (package bridge) → act,
//     carrying CAPI's life cycle (pause, deletion order, the provisioned
//     milestone) and writing only what changed;
//   - tenancy keeps each namespace's credentials record, the policies that
//     enforce it, and revokes what a withdrawn grant reaches.
//
// The packages they share (access, apply, budget, caching, composed,
// contracts, policies, resolve, restmapper, webhook) import none of them.
package controllers
