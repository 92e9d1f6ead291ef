//go:build tools

// Package tools pins clusterctl for hack/ensure-tools.sh, which builds it from
// the Go module proxy, and with it CAPI's core controller manager
// (sigs.k8s.io/cluster-api/core, a main package, so not imported here; its
// dependencies are in go.sum). It keeps their dependencies out of the
// project's module.
package tools

import _ "sigs.k8s.io/cluster-api/cmd/clusterctl"
