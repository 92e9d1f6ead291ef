// Package bridge maps Crossplane composite resources onto CAPI's
// infrastructure contract. Each concern lives in its own package, as pure
// functions over an XR's unstructured content so that any XRD declaring the
// contract works, not only CAPXP's own:
//
//   - readiness: what Crossplane says about the XR (Ready, Synced, their
//     observed generation);
//   - outputs: the contract outputs a composition reports, checked, and the
//     spec fields they map to;
//   - gate: when a machine XR may be composed, and what is injected then;
//   - credentials: whether an XR may use the credentials it names;
//   - xrd: whether an XRD can implement the contract it declares.
//
// The controllers in package controllers read objects, call these, and write
// only what changed.
package bridge
