//go:build tools

// Package tools pins provider-kubernetes, the provider the local backend
// composes with, for hack/ensure-tools.sh, which builds it from the Go module
// proxy for the local management plane.
package tools

import _ "github.com/crossplane-contrib/provider-kubernetes/cmd/provider"
