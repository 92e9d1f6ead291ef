// Package inplace decides whether a running machine can take a change of
// its XR without being replaced, as CAPI's in-place update extension asks
// (CanUpdateMachine, CanUpdateMachineSet), and whether an in-place update
// has reached it (UpdateMachine).
//
// What may change in place is declared, not guessed: each Composition of
// an InfraMachine kind lists the XR fields its composed resources take on
// a running machine (the capxp.dev/in-place-fields annotation, which
// Crossplane copies onto every CompositionRevision). A change is made in
// place only when every field that changes is listed by the revision each
// running machine is pinned to, and is none of the fields that never
// change in place: the credentials, the Composition's selection, and what
// the bridge writes. Anything else is refused with a reason, and CAPI
// rolls the machines as it always has.
//
// A change of a Machine's bootstrap config (a KubeadmConfig's files, say)
// is judged the same way, by what the Composition declares its hosts
// apply on a running machine (capxp.dev/in-place-bootstrap-fields).
//
// Every function here is pure: the extension's handlers read the objects
// and answer with what these decide.
package inplace
