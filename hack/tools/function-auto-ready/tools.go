//go:build tools

// Package tools pins function-auto-ready for hack/ensure-tools.sh, which builds it from the
// Go module proxy. It keeps function-auto-ready's dependencies out of the project's module.
package tools

import _ "github.com/crossplane/function-auto-ready"
