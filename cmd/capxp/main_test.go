package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestHelp: every command's --help exits 0 and lists each of its flags.
func TestHelp(t *testing.T) {
	manager := func(args []string, _, stderr io.Writer) int {
		if err := runManager(args, stderr); !errors.Is(err, pflag.ErrHelp) {
			t.Errorf("capxp manager --help returned %v, want the help", err)
			return 1
		}
		return 0
	}
	cases := map[string]struct {
		run   func(args []string, stdout, stderr io.Writer) int
		args  []string
		flags []string
	}{
		"manager": {run: manager, args: []string{"--help"},
			flags: []string{"--kubeconfig", "--kube-api-qps", "--kube-api-burst", "--leader-elect", "--webhook-port", "--diagnostics-address", "-v,"}},
		"composition check": {run: runComposition, args: []string{"check", "--help"},
			flags: []string{"-xr", "-xrd", "-crds", "-observed", "-functions", "-function-asg-instances", "-tools-dir", "-timeout", "-o"}},
		"xrd adopt":        {run: runXRD, args: []string{"adopt", "-h"}, flags: []string{"-o"}},
		"describe cluster": {run: runDescribe, args: []string{"cluster", "--help"}, flags: []string{"--namespace", "--kubeconfig", "--context", "--as", "--as-group", "--show-conditions", "--echo", "--color", "-o"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := tc.run(tc.args, &stdout, &stderr); got != 0 {
				t.Errorf("capxp %s %s exited %d, want 0:\n%s", name, strings.Join(tc.args, " "), got, stderr.String())
			}
			help := stdout.String() + stderr.String()
			for _, f := range tc.flags {
				if !strings.Contains(help, f) {
					t.Errorf("capxp %s --help does not list %s:\n%s", name, f, help)
				}
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
}
