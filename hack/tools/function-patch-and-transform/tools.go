//go:build tools

// Package tools pins function-patch-and-transform for hack/ensure-tools.sh, which builds it from the
// Go module proxy. It keeps function-patch-and-transform's dependencies out of the project's module.
package tools

import _ "github.com/crossplane-contrib/function-patch-and-transform"
