//go:build tools

// Package tools pins clusterctl for hack/ensure-tools.sh, which builds it from
// the Go module proxy, and with it CAPI's core controller manager
// (sigs.k8s.io/cluster-api/core) and KubeadmControlPlane's
// (sigs.k8s.io/cluster-api/controlplane/kubeadm): main packages, so not
// imported here; their dependencies are in go.sum. It keeps their
// dependencies out of the project's module.
package tools

import _ "sigs.k8s.io/cluster-api/cmd/clusterctl"
