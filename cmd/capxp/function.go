package main

import (
	"fmt"
	"io"
	"os"

	sdk "github.com/crossplane/function-sdk-go"

	"github.com/capxp/cluster-api-provider-crossplane/internal/function/asginstances"
)

const functionUsage = `Usage: capxp function asg-instances [flags]

Serves function-asg-instances, the composition function that lists the
instances of the AWS auto scaling groups a Composition composes and writes
their provider IDs to status.outputs.providerIDList. The Function package's
image runs it with no arguments; Crossplane's function runtime gives it its
serving certificate in TLS_SERVER_CERTS_DIR.
`

// runFunctionCommand serves a composition function until it fails.
func runFunctionCommand(args []string, stderr io.Writer) int {
	fs, ok := subcommand(args, "asg-instances", "capxp function asg-instances", functionUsage, stderr)
	if !ok {
		return 2
	}
	address := fs.String("address", ":9443", "Address to serve gRPC on.")
	network := fs.String("network", "tcp", "Network to serve on (tcp or unix).")
	certs := fs.String("tls-certs-dir", os.Getenv("TLS_SERVER_CERTS_DIR"), "Folder of the serving certificate (tls.crt, tls.key) and of the CA of Crossplane's client certificate (ca.crt); $TLS_SERVER_CERTS_DIR by default.")
	insecure := fs.Bool("insecure", false, "Serve without mutual TLS (for crossplane render and development only).")
	metrics := fs.String("metrics-address", ":8080", "Address to serve Prometheus metrics on; none when empty.")
	debug := fs.Bool("debug", false, "Log every call.")
	if err := fs.Parse(args[1:]); err != nil {
		return parseStatus(err)
	}
	log, err := sdk.NewLogger(*debug)
	if err != nil {
		fmt.Fprintln(stderr, "capxp function asg-instances:", err)
		return 1
	}
	if err := sdk.Serve(asginstances.NewFunction(log),
		sdk.Listen(*network, *address),
		sdk.MTLSCertificates(*certs),
		sdk.Insecure(*insecure),
		sdk.WithMetricsServer(*metrics)); err != nil {
		fmt.Fprintln(stderr, "capxp function asg-instances:", err)
		return 1
	}
	return 0
}
