// Command capxp is CAPXP: the Cluster API infrastructure provider backed by
// Crossplane composite resources.
//
//	capxp manager [flags]                 run the bridge controller manager
//	capxp composition check COMPOSITION   check a Composition against the contract
//	capxp xrd adopt XRD                   print the template CRD and RBAC of an XRD
//	capxp describe cluster NAME           print a Cluster's tree, down to each XR's composed resources
//	capxp plan -f FILE                    say which Machines a change will replace
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
	"slices"
	"strings"

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
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses, one per kind of outcome and the same for every command.
const (
	// exitOK: the command did what was asked (a check: everything holds).
	exitOK = 0
	// exitFailed: the command ran and the answer is no (a field that does
	// not hold, an XRD that cannot implement its contract), or it could not
	// do its work (the cluster did not answer, the render engine failed).
	exitFailed = 1
	// exitUsage: what was asked is wrong: an unknown command, flag or
	// value, a missing argument, a file that cannot be read or decoded, no
	// kubeconfig to talk to a cluster with.
	exitUsage = 2
)

// run runs `capxp ARGS`; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	top := command{name: "capxp", usage: usage, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		return top.usageError("no command given")
	}
	switch args[0] {
	case "manager":
		return runManager(args[1:], stdout, stderr)
	case "composition":
		return runComposition(args[1:], stdout, stderr)
	case "xrd":
		return runXRD(args[1:], stdout, stderr)
	case "describe":
		return runDescribe(args[1:], stdout, stderr)
	case "plan":
		return runPlan(args[1:], stdout, stderr)
	case "version":
		c := command{name: "capxp version", usage: versionUsage, stdout: stdout, stderr: stderr}
		switch rest := args[1:]; {
		case slices.Equal(rest, []string{"-h"}) || slices.Equal(rest, []string{"--help"}):
			return c.help()
		case len(rest) > 0:
			return c.usageError("takes no argument, got %q", strings.Join(rest, " "))
		}
		fmt.Fprintln(stdout, versionString())
		return exitOK
	case "-h", "--help", "help":
		return top.help()
	default:
		return top.usageError("unknown command %q", args[0])
	}
}

const usage = `Usage: capxp <command> [flags]

Commands:
  manager       run the bridge controller manager (capxp manager --help for flags)
  composition   check a Composition against CAPI's contract, offline (capxp composition check --help)
  xrd           print the template CRD and RBAC an XRD that declares a contract needs (capxp xrd adopt --help)
  describe      print a Cluster's tree from CAPI to each composed resource and its credentials (capxp describe cluster --help)
  plan          say which Machines a change will replace before you apply it (capxp plan --help)
  version       print the version

Exit status: 0 when the command did what was asked, 1 when it ran and the
answer is no or its work failed, 2 when what was asked is wrong (a command,
flag, argument or file; no kubeconfig), 3 when a plan replaces or deletes
Machines.
`

const versionUsage = `Usage: capxp version

Prints the release this binary was built from, and its commit.
`

// Output formats of the commands' -o.
const (
	outputJSON = "json"
	outputYAML = "yaml"
)

// command is one of capxp's commands as the user typed it: its name, as
// errors begin with it, and its usage, which --help prints to stdout.
type command struct {
	name, usage    string
	stdout, stderr io.Writer
}

// help prints the usage to stdout.
func (c command) help() int {
	fmt.Fprint(c.stdout, c.usage)
	return exitOK
}

// usageError says in one line what was wrong with the command line, and
// where the usage is.
func (c command) usageError(format string, a ...any) int {
	fmt.Fprintf(c.stderr, "%s: %s\nRun '%s --help' for usage.\n", c.name, fmt.Sprintf(format, a...), c.name)
	return exitUsage
}

// badInput says what is wrong with an input the command line names.
func (c command) badInput(err error) int {
	fmt.Fprintf(c.stderr, "%s: %v\n", c.name, err)
	return exitUsage
}

// failed says why the command could not do its work.
func (c command) failed(err error) int {
	fmt.Fprintf(c.stderr, "%s: %v\n", c.name, err)
	return exitFailed
}

// subcommand starts parsing `capxp COMMAND SUB [args]`: the flag set of
// SUB, called name in errors, and the arguments after SUB; ok is false,
// with status the exit status, when args ask for the usage or do not start
// with SUB.
func subcommand(parent string, args []string, sub, usage string, stdout, stderr io.Writer) (fs *flag.FlagSet, c command, rest []string, status int, ok bool) {
	c = command{name: parent + " " + sub, usage: usage, stdout: stdout, stderr: stderr}
	p := command{name: parent, usage: usage, stdout: stdout, stderr: stderr}
	switch {
	case len(args) == 0:
		return nil, c, nil, p.usageError("no subcommand given (the subcommand is %s)", sub), false
	case args[0] == "-h" || args[0] == "--help" || args[0] == "help":
		return nil, c, nil, p.help(), false
	case args[0] != sub:
		return nil, c, nil, p.usageError("unknown subcommand %q (the subcommand is %s)", args[0], sub), false
	}
	fs = flag.NewFlagSet(c.name, flag.ContinueOnError)
	// The flag package's own messages are replaced by usageError's line.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs, c, args[1:], exitOK, true
}

// parseOne parses flags that may come before or after the one positional
// argument, what, as in the commands' usage lines, and returns it; ok is
// false, with status the exit status, when they ask for the usage or are
// wrong.
func (c command) parseOne(fs *flag.FlagSet, args []string, what string) (arg string, status int, ok bool) {
	positional, status, ok := c.parse(fs, args)
	switch {
	case !ok:
		return "", status, false
	case len(positional) != 1:
		return "", c.usageError("takes one %s, got %d argument(s)", what, len(positional)), false
	}
	return positional[0], exitOK, true
}

// parse parses flags that may come before, between or after the
// positional arguments and returns the positional ones; ok is false, with
// status the exit status, when they ask for the usage or are wrong.
func (c command) parse(fs *flag.FlagSet, args []string) (positional []string, status int, ok bool) {
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				if !strings.Contains(c.usage, "\nFlags:\n") {
					// A usage that does not describe its flags itself.
					var flags strings.Builder
					fs.SetOutput(&flags)
					fs.PrintDefaults()
					c.usage += "\nFlags:\n" + flags.String()
				}
				return nil, c.help(), false
			}
			return nil, c.usageError("%v", err), false
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return positional, exitOK, true
}

// inputError is an error in what the command line names (a file, a flag's
// value): the exit status is exitUsage.
type inputError struct{ error }

func (e inputError) Unwrap() error { return e.error }

// isInputError reports whether err is, or wraps, an inputError.
func isInputError(err error) bool {
	var ie inputError
	return errors.As(err, &ie)
}

// outcome is the exit status of a command's error: exitUsage for an
// inputError, exitFailed for another, said in one line.
func (c command) outcome(err error) int {
	if isInputError(err) {
		return c.badInput(err)
	}
	return c.failed(err)
}

// oneOf is an error when value is not one of the allowed, for flag.
func oneOf(flag, value string, allowed ...string) error {
	if slices.Contains(allowed, value) {
		return nil
	}
	return fmt.Errorf("%s is %q: it must be one of %s", flag, value, strings.Join(allowed, ", "))
}
