package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/capxp/cluster-api-provider-crossplane/controllers"
	"github.com/capxp/cluster-api-provider-crossplane/internal/describe"
)

const describeUsage = `Usage: capxp describe cluster NAME [-n NAMESPACE] [flags]

Prints one tree from a CAPI Cluster to the cloud: its infrastructure, control
plane, MachineDeployments, MachinePools and Machines as clusterctl describe
cluster shows them, and below each XR the credentials it uses (the
ProviderConfig, and the ClusterProviderConfigGrant that lets the namespace
use a shared one) and every resource Crossplane composed for it, with its
external name. Each row has the condition that says most:
an XR's is the first that is not True of the bridge's verdict (its CAPI
owner's CrossplaneInfrastructureReady), Crossplane's Synced, Ready and
Responsive. It reads with your identity: an object that is missing, or that
you may not read, is a row saying so.

Flags:
  -n, --namespace NS       the Cluster's namespace (default: the kubeconfig context's)
  --kubeconfig PATH        the kubeconfig (default: $KUBECONFIG, ~/.kube/config)
  --context NAME           the kubeconfig context
  --as USER                read as this user (impersonation), as kubectl --as
  --as-group GROUP         read as a member of this group too (repeatable)
  --show-conditions KINDS  every condition of these kinds (comma-separated
                           Kind or Kind/name), or "all"
  --echo                   each Machine's bootstrap config too
  -o tree|json|yaml        the output (default tree)
  --color auto|always|never  colour the statuses (default auto: on a terminal)

Exit status: 0 when the tree is printed, 1 when the Cluster cannot be read,
2 for bad input (a flag, an argument, no kubeconfig).
`

// runDescribe runs `capxp describe cluster`; it returns the exit status.
func runDescribe(args []string, stdout, stderr io.Writer) int {
	fs, c, rest, status, ok := subcommand("capxp describe", args, "cluster", describeUsage, stdout, stderr)
	if !ok {
		return status
	}
	var output, color string
	var a access
	var o describe.Options
	a.flags(fs)
	fs.StringVar(&o.ShowConditions, "show-conditions", "", "")
	fs.BoolVar(&o.Echo, "echo", false, "")
	fs.StringVar(&output, "o", "tree", "")
	fs.StringVar(&color, "color", "auto", "")
	name, status, ok := c.parseOne(fs, rest, "Cluster name")
	if !ok {
		return status
	}
	for _, err := range []error{oneOf("-o", output, "tree", outputJSON, outputYAML), oneOf("--color", color, "auto", "always", "never")} {
		if err != nil {
			return c.usageError("%v", err)
		}
	}
	cl, ns, err := a.client(controllers.NewScheme())
	if err != nil {
		return c.outcome(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tree, err := describe.Cluster(ctx, cl, ns, name, o)
	if err != nil {
		return c.failed(err)
	}
	switch output {
	case outputJSON:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(tree)
	case outputYAML:
		var raw []byte
		if raw, err = sigsyaml.Marshal(tree); err == nil {
			_, err = stdout.Write(raw)
		}
	default:
		err = describe.Print(stdout, tree, describe.PrintOptions{Color: color == "always" || (color == "auto" && isTerminal(stdout))})
	}
	if err != nil {
		return c.failed(err)
	}
	return exitOK
}

// stringList is a flag that may be given more than once.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
