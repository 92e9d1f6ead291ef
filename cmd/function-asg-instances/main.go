// Command function-asg-instances is CAPXP's composition function: it lists
// the instances of the AWS auto scaling groups a Composition composes and
// writes their provider IDs to the XR's status.outputs.providerIDList. It is
// the runtime image of the release's Function package, a binary of its own
// so that the manager links neither the AWS SDK nor a function server.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	sdk "github.com/crossplane/function-sdk-go"

	"github.com/capxp/cluster-api-provider-crossplane/internal/function/asginstances"
)

const usage = `Usage: function-asg-instances [flags]

Serves function-asg-instances, the composition function that lists the
instances of the AWS auto scaling groups a Composition composes and writes
their provider IDs to status.outputs.providerIDList. The Function package's
image runs it with no arguments; Crossplane's function runtime gives it its
serving certificate in TLS_SERVER_CERTS_DIR.

Flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run serves the function until it fails; 0 after --help, 2 for bad flags.
func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("function-asg-instances", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	address := fs.String("address", ":9443", "Address to serve gRPC on.")
	network := fs.String("network", "tcp", "Network to serve on (tcp or unix).")
	certs := fs.String("tls-certs-dir", os.Getenv("TLS_SERVER_CERTS_DIR"), "Folder of the serving certificate (tls.crt, tls.key) and of the CA of Crossplane's client certificate (ca.crt); $TLS_SERVER_CERTS_DIR by default.")
	insecure := fs.Bool("insecure", false, "Serve without mutual TLS (for crossplane render and development only).")
	metrics := fs.String("metrics-address", ":8080", "Address to serve Prometheus metrics on; none when empty.")
	debug := fs.Bool("debug", false, "Log every call.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "function-asg-instances: unexpected argument %q: it takes flags only (--help lists them)\n", fs.Arg(0))
		return 2
	}
	log, err := sdk.NewLogger(*debug)
	if err != nil {
		fmt.Fprintln(stderr, "function-asg-instances:", err)
		return 1
	}
	if err := sdk.Serve(asginstances.NewFunction(log),
		sdk.Listen(*network, *address),
		sdk.MTLSCertificates(*certs),
		sdk.Insecure(*insecure),
		sdk.WithMetricsServer(*metrics)); err != nil {
		fmt.Fprintln(stderr, "function-asg-instances:", err)
		return 1
	}
	return 0
}
