// Package outputs reads the contract outputs a composition reports on an XR's
// status, checks them, and computes the contract fields the bridge writes from
// them. A missing or malformed output is returned as a field error naming the
// field and the value; nothing is defaulted silently.
package outputs
