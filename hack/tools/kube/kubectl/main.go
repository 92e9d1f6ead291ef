// Command kubectl is the upstream Kubernetes client, built from the Go
// module proxy at the API server's version, so that the tests run the
// docs' kubectl commands with a kubectl of their own.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
