//go:build tools

// Package tools pins clusterctl for hack/ensure-tools.sh, which builds it from
// the Go module proxy. It keeps clusterctl's dependencies out of the
// project's module.
package tools

import _ "sigs.k8s.io/cluster-api/cmd/clusterctl"
