package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelp: every command's --help prints its usage to stdout, listing
// each of its flags, and exits 0.
func TestHelp(t *testing.T) {
	cases := map[string]struct {
		args  []string
		flags []string
	}{
		"capxp":             {args: []string{"--help"}, flags: []string{"manager", "composition", "xrd", "describe", "version", "Exit status"}},
		"capxp help":        {args: []string{"help"}, flags: []string{"manager", "describe"}},
		"manager":           {args: []string{"manager", "--help"}, flags: []string{"--kubeconfig", "--kube-api-qps", "--kube-api-burst", "--leader-elect", "--webhook-port", "--diagnostics-address", "-v,"}},
		"composition check": {args: []string{"composition", "check", "--help"}, flags: []string{"-xr", "-xrd", "-crds", "-observed", "-functions", "-function-asg-instances", "-tools-dir", "-timeout", "-o", "Exit status"}},
		"composition":       {args: []string{"composition", "--help"}, flags: []string{"capxp composition check COMPOSITION"}},
		"xrd adopt":         {args: []string{"xrd", "adopt", "-h"}, flags: []string{"-o", "Exit status"}},
		"describe cluster":  {args: []string{"describe", "cluster", "--help"}, flags: []string{"--namespace", "--kubeconfig", "--context", "--as", "--as-group", "--show-conditions", "--echo", "--color", "-o", "Exit status"}},
		"describe":          {args: []string{"describe", "-h"}, flags: []string{"capxp describe cluster NAME"}},
		"version":           {args: []string{"version", "--help"}, flags: []string{"capxp version"}},
		"plan":              {args: []string{"plan", "--help"}, flags: []string{"-f FILE", "--namespace", "--kubeconfig", "--context", "--as", "--as-group", "-o", "Exit status"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(tc.args, &stdout, &stderr); got != exitOK {
				t.Errorf("capxp %s exited %d, want 0:\n%s", strings.Join(tc.args, " "), got, stderr.String())
			}
			if stderr.Len() > 0 {
				t.Errorf("capxp %s wrote to stderr, want the help on stdout only:\n%s", strings.Join(tc.args, " "), stderr.String())
			}
			for _, f := range tc.flags {
				if !strings.Contains(stdout.String(), f) {
					t.Errorf("capxp %s does not list %s:\n%s", strings.Join(tc.args, " "), f, stdout.String())
				}
			}
		})
	}
}

// TestMistakes: a mistake on the command line is said in one line on
// stderr, naming the command and what was wrong, followed by where the
// usage is; never the whole usage, never on stdout, and always exit 2. A
// missing kubeconfig says how to point capxp at a cluster.
func TestMistakes(t *testing.T) {
	cases := map[string]struct {
		args []string
		env  map[string]string
		says string
		// hint: the line saying where the usage is follows; false for an
		// input the command line names (a file, a kubeconfig).
		hint bool
	}{
		"no command":               {args: nil, says: "capxp: no command given", hint: true},
		"unknown command":          {args: []string{"frobnicate"}, says: `capxp: unknown command "frobnicate"`, hint: true},
		"no subcommand":            {args: []string{"describe"}, says: "capxp describe: no subcommand given (the subcommand is cluster)", hint: true},
		"unknown subcommand":       {args: []string{"composition", "lint"}, says: `capxp composition: unknown subcommand "lint" (the subcommand is check)`, hint: true},
		"describe without a name":  {args: []string{"describe", "cluster"}, says: "capxp describe cluster: takes one Cluster name, got 0 argument(s)", hint: true},
		"describe, two names":      {args: []string{"describe", "cluster", "a", "b"}, says: "takes one Cluster name, got 2 argument(s)", hint: true},
		"describe, unknown flag":   {args: []string{"describe", "cluster", "demo", "--colour"}, says: "capxp describe cluster: flag provided but not defined: -colour", hint: true},
		"describe, bad output":     {args: []string{"describe", "cluster", "demo", "-o", "wide"}, says: `capxp describe cluster: -o is "wide": it must be one of tree, json, yaml`, hint: true},
		"describe, bad color":      {args: []string{"describe", "cluster", "demo", "--color", "yes"}, says: `--color is "yes": it must be one of auto, always, never`, hint: true},
		"check without a file":     {args: []string{"composition", "check"}, says: "capxp composition check: takes one Composition file, got 0 argument(s)", hint: true},
		"check, bad output":        {args: []string{"composition", "check", "c.yaml", "-o", "yaml"}, says: `-o is "yaml": it must be one of text, json`, hint: true},
		"check, missing file":      {args: []string{"composition", "check", "/nonexistent/composition.yaml"}, says: "capxp composition check: cannot read: open /nonexistent/composition.yaml"},
		"adopt, missing file":      {args: []string{"xrd", "adopt", "/nonexistent/xrd.yaml"}, says: "capxp xrd adopt: cannot read: open /nonexistent/xrd.yaml"},
		"adopt, bad output":        {args: []string{"xrd", "adopt", "x.yaml", "-o", "text"}, says: `capxp xrd adopt: -o is "text"`, hint: true},
		"plan without a change":    {args: []string{"plan"}, says: "capxp plan: -f FILE or --package FILE is required: the change to plan", hint: true},
		"plan, an argument":        {args: []string{"plan", "-f", "c.yaml", "demo"}, says: `capxp plan: takes no argument, got "demo"`, hint: true},
		"plan, bad output":         {args: []string{"plan", "-f", "c.yaml", "-o", "yaml"}, says: `capxp plan: -o is "yaml": it must be one of table, json`, hint: true},
		"plan, missing file":       {args: []string{"plan", "-f", "/nonexistent/change.yaml"}, says: "capxp plan: cannot read the change: open /nonexistent/change.yaml"},
		"plan, not an object":      {args: []string{"plan", "-f", "testdata/plan-not-an-object.yaml"}, says: "capxp plan: testdata/plan-not-an-object.yaml: document 1 has no apiVersion, kind or metadata.name"},
		"plan, empty file":         {args: []string{"plan", "-f", "/dev/null"}, says: "capxp plan: /dev/null holds no object"},
		"plan, not a package":      {args: []string{"plan", "--package", "testdata/plan-scale.yaml"}, says: "capxp plan: cannot read package testdata/plan-scale.yaml (an .xpkg file, as crossplane xpkg build writes it)"},
		"version with an argument": {args: []string{"version", "--short"}, says: `capxp version: takes no argument, got "--short"`, hint: true},
		"manager, unknown flag":    {args: []string{"manager", "--leader-election"}, says: "capxp manager: unknown flag: --leader-election", hint: true},
		"manager, an argument":     {args: []string{"manager", "run"}, says: `capxp manager: takes no argument, got "run"`, hint: true},
		"manager, bad webhook service": {args: []string{"manager", "--webhook-service=capxp-webhook"},
			says: `capxp manager: --webhook-service must be namespace/name, not "capxp-webhook"`},
		"manager, bad webhook service port": {args: []string{"manager", "--webhook-service=ns/svc", "--webhook-service-port=0"},
			says: "capxp manager: --webhook-service-port must be a port number, not 0"},
		"manager, bad credentials provider": {args: []string{"manager", "--credentials-provider=a:b"}, says: "capxp manager: --credentials-provider"},
		"manager without a kubeconfig": {args: []string{"manager"}, env: map[string]string{"KUBECONFIG": "", "HOME": "/nonexistent"},
			says: "capxp manager: no kubeconfig to reach a cluster with: pass --kubeconfig PATH, set $KUBECONFIG, or write ~/.kube/config"},
		"describe without a kubeconfig": {args: []string{"describe", "cluster", "demo"}, env: map[string]string{"KUBECONFIG": "", "HOME": "/nonexistent"},
			says: "capxp describe cluster: no kubeconfig to reach a cluster with: pass --kubeconfig PATH"},
		"plan without a kubeconfig": {args: []string{"plan", "-f", "testdata/plan-scale.yaml"}, env: map[string]string{"KUBECONFIG": "", "HOME": "/nonexistent"},
			says: "capxp plan: no kubeconfig to reach a cluster with: pass --kubeconfig PATH"},
		"describe, a missing kubeconfig": {args: []string{"describe", "cluster", "demo", "--kubeconfig", "/nonexistent/kubeconfig"},
			says: "capxp describe cluster: cannot load kubeconfig"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			if got := run(tc.args, &stdout, &stderr); got != exitUsage {
				t.Errorf("exit %d, want %d:\n%s", got, exitUsage, stderr.String())
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout says %q, want nothing", stdout.String())
			}
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if !strings.Contains(lines[0], tc.says) {
				t.Errorf("stderr's first line is %q, want it to say %q", lines[0], tc.says)
			}
			want := 1
			if tc.hint {
				want = 2
				if len(lines) < 2 || !strings.HasPrefix(lines[1], "Run 'capxp") || !strings.HasSuffix(lines[1], " --help' for usage.") {
					t.Errorf("stderr does not say where the usage is:\n%s", stderr.String())
				}
			}
			if len(lines) != want {
				t.Errorf("stderr has %d lines, want %d:\n%s", len(lines), want, stderr.String())
			}
		})
	}
}

// TestVersion: the version is the release's, never a placeholder.
func TestVersion(t *testing.T) {
	v := versionString()
	if !strings.HasPrefix(v, "v") || strings.Contains(v, "dev") {
		t.Errorf("capxp version prints %q, want the release's version", v)
	}
	var stdout, stderr bytes.Buffer
	if got := run([]string{"version"}, &stdout, &stderr); got != exitOK || stdout.String() != v+"\n" {
		t.Errorf("capxp version: exit %d, stdout %q, want 0 and %q", got, stdout.String(), v+"\n")
	}
}
