package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestXRDAdoptCommand(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	in := func(p string) string { return filepath.Join(root, p) }
	write := func(content string) string {
		f := filepath.Join(t.TempDir(), "in.yaml")
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	raw, err := os.ReadFile(in("examples/platform/xrd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	undeclared := write(strings.Replace(string(raw), "    capxp.dev/contract: InfraMachine\n", "", 1))
	inPlace := write(strings.Replace(string(raw), "  defaultCompositionUpdatePolicy: Manual\n", "", 1))
	cases := map[string]struct {
		reason string
		args   []string
		exit   int
		// says are substrings of stdout (exit 0) or stderr; warns of
		// stderr when the exit is 0.
		says, warns []string
	}{
		"Adopt": {
			reason: "an XRD beside its Composition: the template CRD and the two ClusterRoles, in the order to apply them",
			args:   []string{"adopt", in("examples/platform/xrd.yaml")},
			says: []string{"kind: CustomResourceDefinition", "name: virtualmachinetemplates.compute.platform.example.org",
				"name: capxp:bridge:virtualmachines.compute.platform.example.org", "capxp.dev/aggregate-to-manager: \"true\"",
				"name: capxp:capi:virtualmachines.compute.platform.example.org", "cluster.x-k8s.io/aggregate-to-manager: \"true\""},
		},
		"AdoptWarnsOfInPlaceMachines": {
			reason: "a machine XRD that lets running machines take a new Composition revision is adopted, with a warning naming the field",
			args:   []string{"adopt", inPlace},
			says:   []string{"name: virtualmachinetemplates.compute.platform.example.org"},
			warns:  []string{"XRD virtualmachines.compute.platform.example.org", "defaultCompositionUpdatePolicy: Manual"},
		},
		"NoContract": {
			reason: "an XRD that declares no contract cannot be adopted, and the error names the label",
			args:   []string{"adopt", undeclared},
			exit:   1,
			says:   []string{"virtualmachines.compute.platform.example.org", "capxp.dev/contract"},
		},
		"NoXRD": {
			reason: "a file without an XRD is bad input",
			args:   []string{"adopt", in("compositions/local/machine.yaml")},
			exit:   2,
			says:   []string{"holds no CompositeResourceDefinition"},
		},
		"NoSubcommand": {
			reason: "an unknown subcommand is named, with the one there is",
			args:   []string{"template", in("examples/platform/xrd.yaml")},
			exit:   2,
			says:   []string{`capxp xrd: unknown subcommand "template" (the subcommand is adopt)`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if exit := runXRD(tc.args, &stdout, &stderr); exit != tc.exit {
				t.Fatalf("%s\nexit %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.reason, exit, tc.exit, stdout.String(), stderr.String())
			}
			out := stdout.String()
			if tc.exit != 0 {
				out = stderr.String()
			}
			for _, w := range tc.says {
				if !strings.Contains(out, w) {
					t.Errorf("%s\noutput does not say %q:\n%s", tc.reason, w, out)
				}
			}
			for _, w := range tc.warns {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("%s\nstderr does not say %q:\n%s", tc.reason, w, stderr.String())
				}
			}
			if tc.exit == 0 && len(tc.warns) == 0 && stderr.Len() > 0 {
				t.Errorf("%s\nstderr says %q, want nothing", tc.reason, stderr.String())
			}
			if tc.exit == 0 && (strings.Contains(out, "creationTimestamp: null") || strings.Contains(out, "\nstatus:")) {
				t.Errorf("%s\nthe output carries an empty status or creation timestamp:\n%s", tc.reason, out)
			}
		})
	}

	// -o json is a List of the same objects.
	var stdout, stderr bytes.Buffer
	if exit := runXRD([]string{"adopt", in("examples/platform/xrd.yaml"), "-o", "json"}, &stdout, &stderr); exit != 0 {
		t.Fatalf("-o json: exit %d: %s", exit, stderr.String())
	}
	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			Kind string `json:"kind"`
		} `json:"items"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &list); err != nil {
		t.Fatalf("-o json is not JSON: %v", err)
	}
	if list.Kind != "List" || len(list.Items) != 3 || list.Items[0].Kind != "CustomResourceDefinition" || list.Items[1].Kind != "ClusterRole" {
		t.Errorf("-o json: %+v", list)
	}
}
