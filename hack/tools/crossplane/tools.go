//go:build tools

// Package tools pins crossplane for hack/ensure-tools.sh, which builds it from the
// Go module proxy. It keeps crossplane's dependencies out of the project's module.
package tools

import _ "github.com/crossplane/crossplane/v2/cmd/crossplane"
