package compositions_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// The manager reads, pauses, guards and deletes what the shipped
// Compositions compose: config/rbac/backends.yaml, aggregated into its role,
// must grant every composed kind's group the verbs for it. A kind it may not
// read is foreign to the bridge (never held, guarded or waited for).
func TestBackendRolesCoverComposedKinds(t *testing.T) {
	grants := roleGrants(t, "backends.yaml")
	for _, b := range compositions.Backends {
		kinds, err := compositions.ComposedKinds(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kinds {
			for _, verb := range []string{"get", "list", "watch", "patch", "delete"} {
				if !grants(k.Group, plural(k.Kind), verb) {
					t.Errorf("backend %s composes %s: config/rbac/backends.yaml does not grant the manager %s on %s", b, k.Kind, verb, plural(k.Kind)+"."+k.Group)
				}
			}
		}
	}
}

// capxp plan renders against what an XR composed: the planner's role
// (config/rbac/planner.yaml) must let it read every kind the shipped
// Compositions compose.
func TestPlannerRoleCoversComposedKinds(t *testing.T) {
	grants := roleGrants(t, "planner.yaml")
	for _, b := range compositions.Backends {
		kinds, err := compositions.ComposedKinds(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kinds {
			if !grants(k.Group, plural(k.Kind), "get") {
				t.Errorf("backend %s composes %s: config/rbac/planner.yaml does not let a planner get %s", b, k.Kind, plural(k.Kind)+"."+k.Group)
			}
		}
	}
	for _, verb := range []string{"create", "update", "patch", "delete"} {
		if grants("kubernetes.m.crossplane.io", "objects", verb) || grants("cluster.x-k8s.io", "machinedeployments", verb) {
			t.Errorf("config/rbac/planner.yaml grants %s: a planner changes nothing", verb)
		}
	}
}

// roleGrants reads the ClusterRoles of a file of config/rbac and answers
// whether any grants a verb on a group's resource.
func roleGrants(t *testing.T, file string) func(group, resource, verb string) bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(envtest.RepoRoot(), "config", "rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	for doc := range bytes.SplitSeq(raw, []byte("\n---\n")) {
		r := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal(doc, r); err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r.Rules...)
	}
	return func(group, resource, verb string) bool {
		for _, r := range rules {
			if slices.Contains(r.APIGroups, group) && (slices.Contains(r.Resources, "*") || slices.Contains(r.Resources, resource)) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
}
