// Command kube-apiserver is the upstream Kubernetes API server, built from the
// Go module proxy for the project's tests (the envtest downloads are unreachable
// where the project is built).
package main

import (
	"os"

	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
