// Command capxp is CAPXP: the Cluster API infrastructure provider backed by
// Crossplane composite resources.
//
//	capxp manager [flags]                 run the bridge controller manager
//	capxp composition check COMPOSITION   check a Composition against the contract
//	capxp xrd adopt XRD                   print the template CRD and RBAC of an XRD
//	capxp describe cluster NAME           print a Cluster's tree, down to each XR's composed resources
//	capxp version                         print the version
//
// It links only what the manager runs, and the clients its commands need.
// The local management plane is a separate binary, capxp-dev
// (cmd/capxp-dev), which runs this one as its manager; so is CAPXP's
// composition function (cmd/function-asg-instances).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/pflag"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
)

// versionString is the release this binary was built from (the VERSION
// file), and the commit and whether the tree had changes, as far as the
// build recorded them (a build from a git checkout does).
func versionString() string {
	rev, dirty := "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if rev == "" {
		return capxp.Version()
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += ", with uncommitted changes"
	}
	return capxp.Version() + " (commit " + rev + ")"
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	switch os.Args[1] {
	case "manager":
		switch err := runManager(os.Args[2:], os.Stderr); {
		case errors.Is(err, pflag.ErrHelp):
		case err != nil:
			fmt.Fprintln(os.Stderr, "capxp manager:", err)
			os.Exit(1)
		}
	case "composition":
		os.Exit(runComposition(os.Args[2:], os.Stdout, os.Stderr))
	case "xrd":
		os.Exit(runXRD(os.Args[2:], os.Stdout, os.Stderr))
	case "describe":
		os.Exit(runDescribe(os.Args[2:], os.Stdout, os.Stderr))
	case "version":
		fmt.Println(versionString())
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
  describe      print a Cluster's tree from CAPI to each composed resource and its credentials (capxp describe cluster --help)
  version       print the version
`)
}

// Output formats of the commands' -o.
const (
	outputJSON = "json"
	outputYAML = "yaml"
)

// subcommand starts parsing `capxp COMMAND SUB [args]`: the flag set of
// SUB, called name in errors, printing usage for -h and bad flags; false,
// with the usage printed, when args do not start with sub.
func subcommand(args []string, sub, name, usage string, stderr io.Writer) (*flag.FlagSet, bool) {
	if len(args) == 0 || args[0] != sub {
		fmt.Fprint(stderr, usage)
		return nil, false
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		if !strings.Contains(usage, "\nFlags:\n") {
			// A usage that does not describe its flags itself.
			fmt.Fprintln(stderr, "\nFlags:")
			fs.PrintDefaults()
		}
	}
	return fs, true
}

// parseStatus is a command's exit status after its flags failed to parse: 0
// for -h and --help (the usage is printed), 2 otherwise.
func parseStatus(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
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
