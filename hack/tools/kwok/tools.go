//go:build tools

// Package tools pins kwok, which the local plane runs against the workload
// cluster's API server so that the Nodes the local backend registers
// heartbeat, go Ready and run the pods bound to them, as a kubelet would.
// hack/ensure-tools.sh builds it from the Go module proxy and stages its
// stages (kustomize/stage) from the same module.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
