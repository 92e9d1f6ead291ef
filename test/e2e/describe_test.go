package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var update = flag.Bool("update", false, "rewrite the golden files of capxp describe")

// TestDescribe runs `capxp describe cluster` on a copy of examples/local:
// as the administrator once it is Available (a golden file, names and
// times masked); as a reader with read-only RBAC in the namespace, to whom
// what it may not read is a row saying so; and after the cluster's
// credentials are switched to a shared config no grant lets the namespace
// use, when the tree names the missing grant.
func TestDescribe(t *testing.T) {
	ctx := t.Context()
	const name = "described"
	e := availableCopy(t, name, 2*time.Minute)
	ns := e.Namespace()
	runFor := func(cluster string, args ...string) (string, error) {
		args = append([]string{"describe", "cluster", cluster, "-n", ns, "--kubeconfig", p.Kubeconfig()}, args...)
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "capxp"), args...) //nolint:gosec // the binary the suite built, the test's own arguments.
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("capxp %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String(), nil
	}
	run := func(args ...string) (string, error) { return runFor(name, args...) }
	describe := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	golden(t, "describe-local.txt", masked(describe()))

	// A reader: read-only RBAC on the namespace's CAPI objects, XRs and
	// ProviderConfigs, and nothing else.
	createAs(t, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"clusters", "machines", "machinedeployments"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"infrastructure.cluster.x-k8s.io"}, Resources: []string{"crossplaneclusters", "crossplanemachines"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"kubernetes.m.crossplane.io"}, Resources: []string{"providerconfigs"}, Verbs: []string{"get", "list", "watch"}},
		},
	})
	createAs(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "reader"}},
	})
	eventually(t, "the reader sees the tree, and what it may not read as rows", 30*time.Second, func() error {
		out, err := run("--as", "reader", "--as-group", "system:authenticated")
		if err != nil {
			return err
		}
		for _, want := range []string{
			"ControlPlane: KubeadmControlPlane " + name + "-control-plane  Unknown  Forbidden",
			"MachinePool  Unknown  Forbidden",
			"CrossplaneMachine " + name + "-workers-",
		} {
			if !strings.Contains(collapsed(out), want) {
				return fmt.Errorf("the tree does not hold %q:\n%s", want, out)
			}
		}
		return nil
	})

	// The cluster's credentials switched to a shared config that no grant
	// lets the namespace use.
	shared := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"credentials": map[string]any{
		"source": "Secret", "secretRef": map[string]any{"namespace": ns, "name": "workload-kubeconfig", "key": "kubeconfig"},
	}}}}
	shared.SetAPIVersion("kubernetes.m.crossplane.io/v1alpha1")
	shared.SetKind("ClusterProviderConfig")
	shared.SetName("ungranted-" + name)
	createAs(t, shared)
	xr := &unstructured.Unstructured{}
	xr.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1alpha1")
	xr.SetKind("CrossplaneCluster")
	if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, xr); err != nil {
		t.Fatal(err)
	}
	patch(t, xr, map[string]any{"spec": map[string]any{"providerConfigRef": map[string]any{
		"apiGroup": "kubernetes.m.crossplane.io", "kind": "ClusterProviderConfig", "name": shared.GetName(),
	}}})
	missing := "a ClusterProviderConfigGrant with providerConfigRef kubernetes.m.crossplane.io/" + shared.GetName() +
		" covering namespace " + ns + " is missing"
	eventually(t, "the tree names the missing grant, on the credentials and on the XR", time.Minute, func() error {
		out := collapsed(describe())
		for _, want := range []string{
			"CrossplaneCluster " + name + "  False  NotGranted",
			"Credentials: ClusterProviderConfig " + shared.GetName() + "  False  NotGranted",
			missing,
		} {
			if !strings.Contains(out, want) {
				return fmt.Errorf("the tree does not hold %q:\n%s", want, out)
			}
		}
		return nil
	})
	// Back to the namespace's own credentials, for the deletion.
	patch(t, xr, map[string]any{"spec": map[string]any{"providerConfigRef": map[string]any{
		"apiGroup": "kubernetes.m.crossplane.io", "kind": "ProviderConfig", "name": "workload",
	}}})

	describeBrokenComposition(t, ns, runFor)
	deleteExampleCluster(t, e, 2*time.Minute, func() error {
		if n := len(listOf(t, ns, "infrastructure.cluster.x-k8s.io/v1alpha1", "CrossplaneMachine")); n != 0 {
			return fmt.Errorf("%d CrossplaneMachines remain", n)
		}
		return nil
	})
}

// describeBrokenComposition describes a cluster whose infrastructure's
// Composition fails: the tree names the failing step on the XR's row and
// on the verdict CAPI shows.
func describeBrokenComposition(t *testing.T, ns string, describe func(cluster string, args ...string) (string, error)) {
	t.Helper()
	const name, resource = "broken", "broken-on-purpose"
	comp := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"compositeTypeRef": map[string]any{"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "CrossplaneCluster"},
		"mode":             "Pipeline",
		"pipeline": []any{map[string]any{
			"step":        "compose",
			"functionRef": map[string]any{"name": "crossplane-contrib-function-patch-and-transform"},
			"input": map[string]any{
				"apiVersion": "pt.fn.crossplane.io/v1beta1",
				"kind":       "Resources",
				"resources": []any{map[string]any{
					"name": resource,
					"base": map[string]any{"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "Object",
						"spec": map[string]any{"forProvider": map[string]any{"manifest": map[string]any{
							"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "default"},
						}}}},
					// A map that has no entry for the XR's kind of
					// credentials: the patch, and the pipeline, fail.
					"patches": []any{map[string]any{
						"type": "FromCompositeFieldPath", "fromFieldPath": "spec.providerConfigRef.kind", "toFieldPath": "spec.providerConfigRef.kind",
						"transforms": []any{map[string]any{"type": "map", "map": map[string]any{"NoSuchKind": "ProviderConfig"}}},
					}},
				}},
			},
		}},
	}}}
	comp.SetAPIVersion("apiextensions.crossplane.io/v1")
	comp.SetKind("Composition")
	comp.SetName("crossplanecluster-" + ns + "-broken")
	createAs(t, comp)
	xr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"providerConfigRef": map[string]any{"apiGroup": "kubernetes.m.crossplane.io", "kind": "ProviderConfig", "name": "workload"},
		"crossplane":        map[string]any{"compositionRef": map[string]any{"name": comp.GetName()}},
	}}}
	xr.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1alpha1")
	xr.SetKind("CrossplaneCluster")
	xr.SetNamespace(ns)
	xr.SetName(name)
	cluster := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "CrossplaneCluster", "name": name},
	}}}
	cluster.SetAPIVersion("cluster.x-k8s.io/v1beta2")
	cluster.SetKind("Cluster")
	cluster.SetNamespace(ns)
	cluster.SetName(name)
	createAs(t, xr)
	createAs(t, cluster)
	eventually(t, "the tree names the failing Composition step", 2*time.Minute, func() error {
		out, err := describe(name)
		if err != nil {
			return err
		}
		for _, want := range []string{
			"CrossplaneCluster " + name + "  False  CompositionFailed",
			`cannot render composed resource "` + resource + `"`,
		} {
			if !strings.Contains(collapsed(out), want) {
				return fmt.Errorf("the tree does not hold %q:\n%s", want, out)
			}
		}
		return nil
	})
	if err := mgmt().Delete(t.Context(), cluster); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the broken cluster and its XR are gone", 2*time.Minute, func() error {
		if err := mgmt().Get(t.Context(), client.ObjectKeyFromObject(xr), xr.DeepCopy()); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the XR is still there: %v", err)
		}
		return nil
	})
}

// createAs creates an object as the administrator, deleting it when the
// test ends.
func createAs(t *testing.T, o client.Object) {
	t.Helper()
	if err := mgmt().Create(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgmt().Delete(context.WithoutCancel(t.Context()), o) })
}

var (
	// generated are the random suffixes CAPI gives machines, and the hash
	// Crossplane gives composed resources.
	generated = regexp.MustCompile(`(control-plane|workers)((?:-[a-z0-9]{5}\b){1,2})|(-[0-9a-f]{12})\b`)
	suffix    = regexp.MustCompile(`-[a-z0-9]{5}`)
	spaces    = regexp.MustCompile(`  +`)
)

// masked is describe's tree with the generated parts of names and the
// SINCE column masked: what stays the same from run to run.
func masked(tree string) string {
	lines := strings.Split(tree, "\n")
	since, message := strings.Index(lines[0], "SINCE"), strings.Index(lines[0], "MESSAGE")
	for i, l := range lines {
		l = generated.ReplaceAllStringFunc(l, func(m string) string {
			sub := generated.FindStringSubmatch(m)
			if sub[3] != "" {
				return "-" + strings.Repeat("h", len(m)-1)
			}
			return sub[1] + suffix.ReplaceAllString(sub[2], "-xxxxx")
		})
		r := []rune(l)
		if i > 0 && since >= 0 && message > since && len(r) > since {
			if len(r) < message {
				r = append(r, []rune(strings.Repeat(" ", message-len(r)))...)
			}
			if strings.TrimSpace(string(r[since:message])) != "" {
				copy(r[since:message], []rune(fmt.Sprintf("%-*s", message-since, "<t>")))
			}
			l = strings.TrimRight(string(r), " ")
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n")
}

// collapsed is a tree with its columns two spaces apart.
func collapsed(tree string) string { return spaces.ReplaceAllString(tree, "  ") }

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s ./test/e2e/ -update writes it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("capxp describe: the tree differs from %s (-update rewrites it):\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}
