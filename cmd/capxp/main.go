// Command capxp is CAPXP: the Cluster API infrastructure provider backed by
// Crossplane composite resources.
//
//	capxp manager [flags]   run the bridge controller manager
//	capxp version           print the version
//
// It links only what the manager runs. The local management plane is a
// separate binary, capxp-dev (cmd/capxp-dev), which runs this one as its
// manager.
package main

import (
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
  manager   run the bridge controller manager (capxp manager --help for flags)
  version   print the version
`)
}
