// Command capxp-dev runs CAPXP's local management plane with an example
// cluster: etcd and kube-apiserver for a management and a workload cluster,
// kube-controller-manager, Crossplane core with the composition functions,
// provider-kubernetes, CAPI's core controllers (in this process) and the
// capxp binary as the CAPXP manager; then it applies examples/local, shows
// its progress until CAPI reports the cluster and machines provisioned,
// prints how to reach both clusters and runs until interrupted.
//
// It is a binary of its own so that the product binary, capxp, links only
// what `capxp manager` runs. It needs no checkout: CAPXP's manifests are
// embedded, and the component binaries and other projects' CRDs come from a
// tools directory that hack/ensure-tools.sh fills (`make tools`).
//
//	capxp-dev [--tools-dir DIR] [--manager-binary PATH] [--dir DIR] [--timeout D] [--check]
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/capxp/cluster-api-provider-crossplane/dev/lifeline"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
)

func main() {
	// First: this binary also starts etcd and kube-apiserver through links
	// to itself, so that they die with it.
	lifeline.Main()
	// A closed stdout (`make dev | tee log`, then Ctrl-C) must not kill the
	// plane before it stops its components: writes fail instead.
	signal.Ignore(syscall.SIGPIPE)
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "capxp-dev:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := pflag.NewFlagSet("capxp-dev", pflag.ContinueOnError)
	fs.SetOutput(os.Stdout)
	dir := fs.String("dir", filepath.Join(os.TempDir(), "capxp-dev"), "Directory for the plane's logs, kubeconfigs and state (emptied first).")
	timeout := fs.Duration("timeout", 5*time.Minute, "How long to wait for the example cluster to be provisioned.")
	toolsDir := fs.String("tools-dir", string(tools.Default()),
		"Directory hack/ensure-tools.sh filled with the component binaries and CRDs ($"+tools.EnvDir+", else .cache/tools of the working directory).")
	manager := fs.String("manager-binary", defaultManager(), "The capxp binary to run as the CAPXP manager.")
	release := fs.String("release", "",
		"A `make release` folder to install CAPXP from, as a platform does: its Crossplane packages served from a registry on loopback, "+
			"installed by Crossplane's package manager, the bridge run as the installed Provider package (its image's binary, --manager-binary, "+
			"with the runtime configuration of crossplane-setup.yaml). Empty: the plane applies CAPXP's manifests and runs the manager itself.")
	exampleName := fs.String("example", plane.Examples[0].Name, "The example cluster to apply: "+exampleList()+".")
	bare := fs.Bool("bare", false,
		"Start the plane without CAPXP and without an example (needs --release): Crossplane, CAPI and the registry run, and you install CAPXP "+
			"as docs/install.md says; the plane runs what you install (the packages Crossplane installs, the Deployment in "+plane.KubeletNamespace+").")
	check := fs.Bool("check", false, "Only check that every binary and CRD the plane needs is there, and say what is missing.")
	fs.Usage = func() {
		fmt.Fprint(os.Stdout, `Usage: capxp-dev [flags]

Runs CAPXP's local management plane on loopback with an example cluster
(examples/local unless --example), shows its progress until it is
provisioned, and runs until interrupted (Ctrl-C). Needs ports 8080 and 9443 free (provider-kubernetes).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	example, err := plane.ExampleNamed(*exampleName)
	if err != nil {
		return err
	}
	opts := plane.Options{Dir: *dir, ManagerBinary: *manager, Tools: tools.Dir(*toolsDir), Release: *release, Bare: *bare}
	if *bare {
		if *release == "" {
			return errors.New("--bare needs --release: the plane serves that release's dependencies from its registry")
		}
		// The bridge runs from the image the user pushes, not from a binary.
		opts.ManagerBinary = ""
	}
	if err := plane.Check(opts); err != nil {
		return err
	}
	if *check {
		fmt.Println("every binary and CRD the plane needs is there")
		return nil
	}
	if err := os.RemoveAll(*dir); err != nil {
		return fmt.Errorf("cannot empty %s: %w", *dir, err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	// Output errors are ignored: a closed stdout must not stop the plane
	// from stopping its components.
	say := func(format string, a ...any) {
		_, _ = fmt.Printf("[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}
	// After the first interrupt, a second one kills this process at once;
	// its children die with it.
	context.AfterFunc(ctx, func() {
		stop()
		say("interrupted: stopping the plane (interrupt again to kill it at once)")
	})

	opts.Progress = say
	p, err := plane.Start(ctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			say("stopped before the plane was up")
			return nil // interrupted; Start stopped what it had started
		}
		return err
	}
	defer func() {
		say("stopping the plane")
		p.Stop()
		say("stopped; logs are in %s", p.Dir())
	}()

	if *bare {
		printBare(p)
		<-ctx.Done()
		return nil
	}
	say("applying %s: Cluster %s/%s with %s", path.Dir(example.File), example.Namespace(), example.Cluster, example.Description)
	if err := p.ApplyNamedExample(ctx, example); err != nil {
		if ctx.Err() != nil {
			return nil // interrupted
		}
		return err
	}
	progress := func(st plane.Status) {
		say("progress:")
		for _, l := range st.Lines {
			_, _ = fmt.Println("          " + l)
		}
	}
	if err := p.WaitForExampleOf(ctx, example.Cluster, example.Machines, *timeout, progress); err != nil {
		if ctx.Err() != nil {
			return nil // interrupted
		}
		return err
	}
	say("the cluster's infrastructure is provisioned and every Machine has a providerID and a Node")
	if example.Available {
		if err := p.WaitForExampleAvailable(ctx, example.Cluster, example.Machines, *timeout, progress); err != nil {
			if ctx.Err() != nil {
				return nil // interrupted
			}
			return err
		}
		say("the cluster is Available: its control plane and workers are, and every Machine is Ready and Available")
	}
	_, _ = fmt.Printf(`
Management cluster (CAPI, Crossplane, CAPXP):
  export KUBECONFIG=%s
  kubectl get clusters,machines,crossplaneclusters,crossplanemachines -n %s
  clusterctl describe cluster %s -n %s
Workload cluster:
  kubectl --kubeconfig %s get nodes

Running until interrupted (Ctrl-C).
`, p.Kubeconfig(), example.Namespace(), example.Cluster, example.Namespace(), filepath.Join(p.Dir(), "workload.kubeconfig"))
	<-ctx.Done()
	return nil
}

// printBare says how to install CAPXP on a bare plane with docs/install.md.
func printBare(p *plane.Plane) {
	r := p.Registry()
	_, _ = fmt.Printf(`
The plane runs Crossplane and CAPI, with no part of CAPXP: install it as docs/install.md
says, in a shell with

  export KUBECONFIG=%s
  export REGISTRY=%s/capxp SSL_CERT_FILE=%s

$REGISTRY is the plane's registry (TLS, its CA in SSL_CERT_FILE): build the release for it
(make release PACKAGE_REGISTRY=$REGISTRY IMAGE_REPOSITORY=$REGISTRY/capxp-manager) and push
there. clusterctl's configuration for the CAPI the plane runs is %s:
copy it to ~/.cluster-api/clusterctl.yaml (clusterctl's default) and, with the
crossplane provider's entry added at the end, to your clusterctl.yaml: clusterctl
init then finds CAPI installed, and installs only what you name.
The workload cluster's kubeconfig (the local flavor composes Nodes into it) is %s.
The plane plays the kubelet for the Deployment in %s and runs the packages Crossplane
installs, from the images in its registry.

Running until interrupted (Ctrl-C).
`, p.Kubeconfig(), r.Host, r.CAFile, p.ClusterctlConfig(), filepath.Join(p.Dir(), "workload.kubeconfig"), plane.KubeletNamespace)
}

// defaultManager is capxp beside this binary (make dev builds both into
// bin/).
func defaultManager() string {
	self, err := os.Executable()
	if err != nil {
		return "capxp"
	}
	return filepath.Join(filepath.Dir(self), "capxp")
}

// exampleList names the examples and what each shows.
func exampleList() string {
	var b strings.Builder
	for i, e := range plane.Examples {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", e.Name, e.Description)
	}
	return b.String()
}
