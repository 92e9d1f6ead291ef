package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/test/plane"
)

// runDev starts the local management plane, applies examples/local, shows
// its progress until CAPI reports the cluster and machines provisioned,
// prints how to reach both clusters, and runs until interrupted.
func runDev(args []string) error {
	fs := pflag.NewFlagSet("dev", pflag.ContinueOnError)
	dir := fs.String("dir", filepath.Join(os.TempDir(), "capxp-dev"), "Directory for the plane's logs, kubeconfigs and state (emptied first).")
	timeout := fs.Duration("timeout", 5*time.Minute, "How long to wait for the example cluster to be provisioned.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return errors.Wrap(err, "cannot find the capxp binary to run the manager from")
	}
	if err := os.RemoveAll(*dir); err != nil {
		return errors.Wrapf(err, "cannot empty %s", *dir)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	say := func(format string, a ...any) {
		fmt.Printf("[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}

	p, err := plane.Start(ctx, plane.Options{Dir: *dir, ManagerBinary: self, Progress: say})
	if err != nil {
		return err
	}
	defer func() {
		say("stopping the plane")
		p.Stop()
		say("stopped; logs are in %s", *dir)
	}()

	say("applying examples/local: Cluster %s/%s with 1 control-plane machine and a MachineDeployment of 2", plane.ExampleNamespace, plane.ExampleCluster)
	if err := p.ApplyExample(ctx); err != nil {
		return err
	}
	if err := p.WaitForExample(ctx, plane.ExampleMachines, *timeout, func(st plane.Status) {
		say("progress:")
		for _, l := range st.Lines {
			fmt.Println("          " + l)
		}
	}); err != nil {
		return err
	}
	say("the cluster's infrastructure is provisioned and every Machine has a providerID and a Node")
	fmt.Printf(`
Management cluster (CAPI, Crossplane, CAPXP):
  export KUBECONFIG=%s
  kubectl get clusters,machines,crossplaneclusters,crossplanemachines -n %s
Workload cluster:
  kubectl --kubeconfig %s get nodes

Running until interrupted (Ctrl-C).
`, p.Kubeconfig(), plane.ExampleNamespace, filepath.Join(p.Dir(), "workload.kubeconfig"))
	<-ctx.Done()
	return nil
}
