package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDescribeCommandInput(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(empty, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason string
		args   []string
		exit   int
		says   string
	}{
		"NoSubcommand": {
			reason: "only clusters are described",
			args:   []string{"machine", "demo"},
			exit:   2,
			says:   `capxp describe: unknown subcommand "machine" (the subcommand is cluster)`,
		},
		"NoName": {
			reason: "a Cluster is named",
			args:   []string{"cluster"},
			exit:   2,
			says:   "capxp describe cluster: takes one Cluster name, got 0 argument(s)",
		},
		"UnknownOutput": {
			reason: "the outputs are tree, json and yaml",
			args:   []string{"cluster", "demo", "-o", "wide"},
			exit:   2,
			says:   `-o is "wide": it must be one of tree, json, yaml`,
		},
		"UnknownColor": {
			reason: "colour is auto, always or never",
			args:   []string{"cluster", "demo", "--color", "sometimes"},
			exit:   2,
			says:   `--color is "sometimes": it must be one of auto, always, never`,
		},
		"NoCluster": {
			reason: "a kubeconfig that reaches no cluster is bad input, said with how to point capxp at one",
			args:   []string{"cluster", "demo", "-n", "team-a", "--kubeconfig", empty},
			exit:   2,
			says:   "no kubeconfig to reach a cluster with: pass --kubeconfig PATH",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if exit := runDescribe(tc.args, &stdout, &stderr); exit != tc.exit {
				t.Fatalf("%s\nexit %d, want %d\nstderr:\n%s", tc.reason, exit, tc.exit, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.says) {
				t.Errorf("%s\nstderr does not say %q:\n%s", tc.reason, tc.says, stderr.String())
			}
			if stdout.Len() > 0 {
				t.Errorf("%s\nstdout: %q, want nothing", tc.reason, stdout.String())
			}
		})
	}
}
