// Package bridge maps Crossplane composite resources onto CAPI's
// infrastructure contract. Each concern lives in its own package, as pure
// functions over an XR's unstructured content so that any XRD declaring the
// contract works, not only CAPXP's own:
//
//   - readiness: what Crossplane says about the XR (Ready, Synced, their
//     observed generation);
//   - outputs: the contract outputs a composition reports, checked, and the
//     spec fields they map to (one file per contract, fields.go for where
//     each maps);
//   - contract: the verdict on an XR against its contract, from readiness
//     and outputs;
//   - verdict: the one shape of every decision (ready, reason, message);
//   - lifecycle: what one reconcile does with an XR and what it composed
//     (pause, hold, finalizer, deletion order), and the timings the
//     reconcilers share (RecheckAccessAfter);
//   - gate: when a machine XR may be composed, and what is injected then;
//   - credentials: whether an XR may use the credentials it names;
//   - kubeconfig: a kubeconfig judged by its content alone;
//   - xrd: whether an XRD can implement the contract it declares.
//
// Condition reasons that are API live in apis/infrastructure/v1alpha1. The
// reconcilers under controllers/ read objects, call these, and write only
// what changed.
package bridge
