// Command kube-controller-manager is the upstream controller manager, built
// from the Go module proxy. The tests run only its garbage-collector and
// namespace controllers, which envtest lacks.
package main

import (
	"os"

	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
