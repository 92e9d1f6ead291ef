// Command capxp is CAPXP: the Cluster API infrastructure provider backed by
// Crossplane composite resources.
//
//	capxp manager [flags]                 run the bridge controller manager
//	capxp composition check COMPOSITION   check a Composition against the contract
//	capxp xrd adopt XRD                   print the template CRD and RBAC of an XRD
//	capxp version                         print the version
//
// It links only what the manager runs. The local management plane is a
// separate binary, capxp-dev (cmd/capxp-dev), which runs this one as its
// manager.
package main

import (
	"flag"
	"fmt"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	switch os.Args[1] {
	case "manager":
		if err := runManager(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "capxp manager:", err)
			os.Exit(1)
		}
	case "composition":
		os.Exit(runComposition(os.Args[2:], os.Stdout, os.Stderr))
	case "xrd":
		os.Exit(runXRD(os.Args[2:], os.Stdout, os.Stderr))
	case "version":
		fmt.Println(version)
	case "-h", "--help", "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "capxp: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `Usage: capxp <command> [flags]

Commands:
  manager       run the bridge controller manager (capxp manager --help for flags)
  composition   check a Composition against CAPI's contract, offline (capxp composition check --help)
  xrd           print the template CRD and RBAC an XRD that declares a contract needs (capxp xrd adopt --help)
  version       print the version
`)
}

// parseInterspersed parses flags that may come before, between or after the
// positional arguments, as in the commands' usage lines, and returns the
// positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return positional, nil
}
