// Command kube-scheduler is the upstream scheduler, built from the Go module
// proxy. The local plane runs it on its workload cluster, so that Pods a
// user or a test creates there are placed on the simulated Nodes.
package main

import (
	"os"

	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
