// Package outputs reads the contract outputs a composition reports on an XR's
// status, checks them, and computes the contract fields the bridge writes from
// them. A missing or malformed output is returned as a field error naming the
// field and the value; nothing is defaulted silently.
//
// What maps where is decided here, from values alone: each kind's Map
// function reads and checks its outputs, and its Spec says which contract
// fields they set (fields.go). Mapping a new output onto a contract is a
// change to this package only: the kind's file (its struct and Map
// function) and fields.go.
package outputs
