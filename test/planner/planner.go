// Package planner runs `capxp plan` in tests as a platform's planner does:
// the user "planner", bound to the shipped read-only planner roles
// (config/rbac/planner.yaml), with the plan read as JSON.
package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/capxp/cluster-api-provider-crossplane/internal/plan"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// User is who plans.
const User = "planner"

// Bind binds User to the shipped planner roles: in the namespace, and
// cluster-wide for the Compositions, the CRDs, the ClusterClasses'
// templates and the in-place update extension's registration.
func Bind(ctx context.Context, c client.Client, ns string) error {
	namespaced, clusterWide, err := Roles()
	if err != nil {
		return err
	}
	for _, o := range []client.Object{namespaced, clusterWide,
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "planner-" + ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterWide.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: User}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planner"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: namespaced.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: User}},
		},
	} {
		// The roles are the shipped ones, the same for every test.
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// Roles are the shipped planner ClusterRoles: the one bound in a
// namespace, and the cluster-wide one.
func Roles() (namespaced, clusterWide *rbacv1.ClusterRole, err error) {
	raw, err := os.ReadFile(filepath.Join(envtest.RepoRoot(), "config", "rbac", "planner.yaml"))
	if err != nil {
		return nil, nil, err
	}
	docs := bytes.Split(raw, []byte("\n---\n"))
	if len(docs) != 2 {
		return nil, nil, fmt.Errorf("config/rbac/planner.yaml holds %d documents, want the two planner roles", len(docs))
	}
	namespaced, clusterWide = &rbacv1.ClusterRole{}, &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(docs[0], namespaced); err != nil {
		return nil, nil, err
	}
	if err := yaml.Unmarshal(docs[1], clusterWide); err != nil {
		return nil, nil, err
	}
	return namespaced, clusterWide, nil
}

// Args are capxp plan's arguments for a change in ns, as User, against the
// plane of kubeconfig: input names the change (a change read from stdin
// when empty); bin holds the command's companion binaries.
func Args(kubeconfig, bin, ns string, input ...string) []string {
	if len(input) == 0 {
		input = []string{"-f", "-"}
	}
	return append([]string{"plan", "-n", ns, "--kubeconfig", kubeconfig, "--as", User, "--as-group", "system:authenticated",
		"--tools-dir", envtest.ToolsDir(), "--function-asg-instances", filepath.Join(bin, "function-asg-instances")}, input...)
}

// Run plans change (read from stdin) with bin/capxp and args: the plan, its
// JSON, and whether it exited 3 (something would be replaced or deleted).
func Run(ctx context.Context, bin string, args []string, change string) (plan.Plan, string, bool, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "capxp"), append(args, "-o", "json")...) //nolint:gosec // the binary the suite built, the test's own arguments.
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(change), &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 3) {
		return plan.Plan{}, "", false, fmt.Errorf("capxp plan: %w\n%s", err, stderr.String())
	}
	var got plan.Plan
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		return plan.Plan{}, "", false, fmt.Errorf("capxp plan -o json: %w\n%s", err, stdout.String())
	}
	return got, stdout.String(), exit != nil, nil
}
