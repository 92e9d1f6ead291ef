//go:build e2e

package capie2e

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// inPlaceClassFile is the ClusterClass the e2e-in-place flavor names, which
// addFlavors makes from the release's crossplane-local.
const inPlaceClassFile = "clusterclass-crossplane-local-in-place.yaml"

// localClassName names the release's class and its templates
// (crossplane-local, crossplane-local-control-plane, crossplane-local-worker).
var localClassName = regexp.MustCompile(`(?m)^(\s*name: )crossplane-local\b`)

// inPlaceClass makes, from the release's ClusterClass crossplane-local and
// its templates, the class CAPI's ClusterInPlaceUpdateSpec runs on:
// crossplane-local-in-place, with the spec's "files" variable written into
// the control plane's and the workers' KubeadmConfigs (which the local
// Composition declares its hosts apply in place), and a KubeadmControlPlane
// that never surges, so that it updates its Machines in place rather than
// replace them. Made from the release's file, it follows every change of
// the release's class.
func inPlaceClass(release []byte) ([]byte, error) {
	return derivedClass(release, "crossplane-local-in-place", "inPlaceClass", func(u *unstructured.Unstructured) error {
		switch u.GetKind() {
		case "ClusterClass":
			return addFilesVariable(u)
		case "KubeadmControlPlaneTemplate":
			return unstructured.SetNestedField(u.Object, int64(0), "spec", "template", "spec", "rollout", "strategy", "rollingUpdate", "maxSurge")
		}
		return nil
	})
}

// derivedClass renames the release's ClusterClass crossplane-local and its
// templates to name (maker, the function that calls it, is named in the
// file's first line) and lets edit change each of their objects.
func derivedClass(release []byte, name, maker string, edit func(*unstructured.Unstructured) error) ([]byte, error) {
	renamed := localClassName.ReplaceAll(release, []byte("${1}"+name))
	out := bytes.NewBufferString("# Made by the e2e suite from the release's clusterclass-crossplane-local.yaml (" + maker + ").\n")
	for _, doc := range strings.Split(string(renamed), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return nil, fmt.Errorf("cannot read the release's ClusterClass: %w", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := edit(u); err != nil {
			return nil, fmt.Errorf("cannot make the %s %s: %w", name, u.GetKind(), err)
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	return out.Bytes(), nil
}

// addFilesVariable adds to a ClusterClass the variable "files" and the patch
// that writes it into the control plane's and the workers' bootstrap
// configs.
func addFilesVariable(class *unstructured.Unstructured) error {
	variable := map[string]any{
		"name":     "files",
		"required": false,
		"schema": map[string]any{"openAPIV3Schema": map[string]any{
			"type":     "array",
			"maxItems": int64(16),
			"items": map[string]any{
				"type":     "object",
				"required": []any{"path", "content"},
				"properties": map[string]any{
					"path":    map[string]any{"type": "string", "minLength": int64(1)},
					"content": map[string]any{"type": "string"},
				},
			},
			"description": "Files written on every machine by kubeadm's bootstrap (its KubeadmConfigs' files).",
		}},
	}
	writeFiles := func(apiVersion, kind string, match map[string]any, path string) map[string]any {
		return map[string]any{
			"selector": map[string]any{"apiVersion": apiVersion, "kind": kind, "matchResources": match},
			"jsonPatches": []any{map[string]any{
				"op": "add", "path": path, "valueFrom": map[string]any{"variable": "files"},
			}},
		}
	}
	patch := map[string]any{
		"name":      "files",
		"enabledIf": "{{ if .files }}true{{ end }}",
		"definitions": []any{
			writeFiles("controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlaneTemplate",
				map[string]any{"controlPlane": true}, "/spec/template/spec/kubeadmConfigSpec/files"),
			writeFiles("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfigTemplate",
				map[string]any{"machineDeploymentClass": map[string]any{"names": []any{"worker"}}}, "/spec/template/spec/files"),
		},
	}
	for field, add := range map[string]any{"variables": variable, "patches": patch} {
		have, _, err := unstructured.NestedSlice(class.Object, "spec", field)
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedSlice(class.Object, append(have, add), "spec", field); err != nil {
			return err
		}
	}
	return nil
}

func TestInPlaceClass(t *testing.T) {
	release, err := os.ReadFile(filepath.Join("..", "..", "packages", "clusterctl", "clusterclass-crossplane-local.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	made, err := inPlaceClass(release)
	if err != nil {
		t.Fatal(err)
	}
	objects := classObjects(t, made)
	class := objects["ClusterClass/crossplane-local-in-place"]
	if class == nil {
		t.Fatalf("no ClusterClass crossplane-local-in-place among %v", slices.Sorted(maps.Keys(objects)))
	}
	cases := map[string]struct {
		object string
		path   []string
		want   any
	}{
		"the class's control plane template": {"ClusterClass/crossplane-local-in-place",
			[]string{"spec", "controlPlane", "templateRef", "name"}, "crossplane-local-in-place-control-plane"},
		"the class's infrastructure template": {"ClusterClass/crossplane-local-in-place",
			[]string{"spec", "infrastructure", "templateRef", "name"}, "crossplane-local-in-place"},
		"the control plane never surges": {"KubeadmControlPlaneTemplate/crossplane-local-in-place-control-plane",
			[]string{"spec", "template", "spec", "rollout", "strategy", "rollingUpdate", "maxSurge"}, 0},
		"the workers' bootstrap template": {"KubeadmConfigTemplate/crossplane-local-in-place-worker",
			[]string{"kind"}, "KubeadmConfigTemplate"},
		"the control plane's machine template": {"CrossplaneMachineTemplate/crossplane-local-in-place-control-plane",
			[]string{"kind"}, "CrossplaneMachineTemplate"},
		"the workers' machine template": {"CrossplaneMachineTemplate/crossplane-local-in-place-worker",
			[]string{"kind"}, "CrossplaneMachineTemplate"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := objects[tc.object]
			if o == nil {
				t.Fatalf("no %s among %v", tc.object, slices.Sorted(maps.Keys(objects)))
			}
			got, _, err := unstructured.NestedFieldNoCopy(o.Object, tc.path...)
			// Read back from YAML, a number is a float64.
			if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("%s %v = %v (%v), want %v", tc.object, tc.path, got, err, tc.want)
			}
		})
	}
	for _, field := range []string{"variables", "patches"} {
		have, _, _ := unstructured.NestedSlice(class.Object, "spec", field)
		if !slices.ContainsFunc(have, func(v any) bool { return v.(map[string]any)["name"] == "files" }) {
			t.Errorf("the class's %s have no files", field)
		}
	}
	all, renamed := len(localClassName.FindAll(made, -1)), strings.Count(string(made), "name: crossplane-local-in-place")
	if renamed != all || all != len(localClassName.FindAll(release, -1)) {
		t.Errorf("%d of the %d names of the release's class are renamed in the in-place class, which has %d", renamed, len(localClassName.FindAll(release, -1)), all)
	}
}

// classObjects reads a made class's objects, by kind/name.
func classObjects(t *testing.T, made []byte) map[string]*unstructured.Unstructured {
	t.Helper()
	objects := map[string]*unstructured.Unstructured{}
	for _, doc := range strings.Split(string(made), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objects[u.GetKind()+"/"+u.GetName()] = u
		}
	}
	return objects
}
