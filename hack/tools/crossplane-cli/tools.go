//go:build tools

// Package tools pins the crossplane CLI for hack/ensure-tools.sh, which builds
// it from the Go module proxy. It keeps the CLI's dependencies out of the
// project's module.
package tools

import _ "github.com/crossplane/cli/v2/cmd/crossplane"
