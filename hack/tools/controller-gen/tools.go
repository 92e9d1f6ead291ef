//go:build tools

// Package tools pins controller-gen for the project's code generation.
package tools

import _ "sigs.k8s.io/controller-tools/cmd/controller-gen"
