//go:build tools

// Package tools pins crane, go-containerregistry's command line, which
// docs/install.md and docs/upgrade.md push the manager image with.
package tools

import _ "github.com/google/go-containerregistry/cmd/crane"
