package aws

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	ctlsetup "github.com/capxp/cluster-api-provider-crossplane/test/clusterctl"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// TestAWSClusterctlMove moves a cluster on the aws backend from a bootstrap
// management cluster to a permanent one with `clusterctl move`. Both are
// installed with clusterctl from the release's provider files, both run the
// real AWS providers, against the same emulator: one account. What the
// account holds must not change: every resource keeps its ID, and nothing
// is created or deleted by the move, counted with the AWS API's describe
// calls. On the target the cluster is provisioned again and then deleted,
// with nothing left in the account.
func TestAWSClusterctlMove(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	dir := t.TempDir()
	clusterctl, bin := ctlsetup.Install(ctx, t, dir)
	bootstrap := startClusterctlPlane(ctx, t, filepath.Join(dir, "bootstrap"), plane.Options{Clusterctl: true, AWS: true})
	// provider-kubernetes listens on fixed ports, and an aws cluster needs
	// none: neither plane runs it.
	bootstrap.StopProviderKubernetes()
	permanent := startClusterctlPlane(ctx, t, filepath.Join(dir, "permanent"), plane.Options{Clusterctl: true, AWS: true,
		AWSEndpoint: bootstrap.AWSEndpoint(), Workload: bootstrap.Workload})
	permanent.StopProviderKubernetes()
	for _, p := range []*plane.Plane{bootstrap, permanent} {
		ctlsetup.Init(ctx, t, p, clusterctl, bin)
		// The team's credentials are set up on each management cluster,
		// like the providers.
		for _, o := range credentials(p.AWSEndpoint()) {
			if err := p.Management().Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	api := awsAPI{endpoint: bootstrap.AWSEndpoint(), region: region}
	before, err := api.count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ami := prepareAccount(ctx, t, api)
	for _, o := range cluster(ami, bootstrap.Workload.Kubeconfig) {
		if err := bootstrap.Management().Client.Create(ctx, o); err != nil {
			t.Fatalf("cannot create %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	start := time.Now()
	eventually(t, "the cluster is ready to move", 15*time.Minute, func() error { return readyToMove(ctx, bootstrap.Management().Client) })
	t.Logf("the cluster provisioned on the bootstrap cluster in %s", time.Since(start).Round(time.Second))
	account, err := api.inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the account holds %d resources", len(account))
	composed := managedNames(ctx, t, bootstrap.Management().Client)

	start = time.Now()
	clusterctl(bootstrap, "move", "-n", ns, "--to-kubeconfig", permanent.Kubeconfig())
	t.Logf("clusterctl move took %s", time.Since(start).Round(time.Second))
	eventually(t, "the cluster is provisioned again on the target, its managed resources synced", 5*time.Minute, func() error {
		if err := readyToMove(ctx, permanent.Management().Client); err != nil {
			return err
		}
		return allSynced(ctx, permanent.Management().Client)
	})
	if err := noneLeft(ctx, bootstrap.Management().Client); err != nil {
		t.Errorf("the source keeps managed resources: %v", err)
	}
	if got := managedNames(ctx, t, permanent.Management().Client); !slices.Equal(got, composed) {
		t.Errorf("the target's managed resources differ from those moved:\nmoved  %v\ntarget %v", composed, got)
	}
	// Whatever the providers on either side were going to do, they have
	// observed every resource since, at least once.
	time.Sleep(75 * time.Second)
	now, err := api.inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(now, account) {
		created, deleted := sets.List(sets.New(now...).Difference(sets.New(account...))), sets.List(sets.New(account...).Difference(sets.New(now...)))
		t.Errorf("the move changed the account: created %v, deleted %v", created, deleted)
	} else {
		t.Logf("the move created 0 and deleted 0 of the account's %d resources", len(account))
	}

	// The permanent cluster deletes it as any other: nothing is left.
	deleteCluster(ctx, t, permanent.Management().Client, api, before)
}

// readyToMove is what clusterctl move checks before it moves a cluster: its
// infrastructure provisioned, its control plane initialized, a node for
// every Machine.
func readyToMove(ctx context.Context, c client.Client) error {
	cl := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl); err != nil {
		return err
	}
	if !ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false) {
		return fmt.Errorf("cluster infrastructure not provisioned")
	}
	if !conditions.IsTrue(cl, clusterv1.ClusterControlPlaneInitializedCondition) {
		return fmt.Errorf("control plane not initialized")
	}
	ms := &clusterv1.MachineList{}
	if err := c.List(ctx, ms, client.InNamespace(ns)); err != nil {
		return err
	}
	if len(ms.Items) != workers+1 {
		return fmt.Errorf("%d Machines, want %d", len(ms.Items), workers+1)
	}
	for i := range ms.Items {
		m := &ms.Items[i]
		if !ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) || !m.Status.NodeRef.IsDefined() {
			return fmt.Errorf("Machine %s not provisioned, or without a node", m.Name)
		}
	}
	return nil
}

// managedNames are the namespace's managed resources, by kind, name and
// external name. A Route's external name is its route table and
// destination: the provider that creates one records Terraform's ID for it
// (r-<table>-<hash>), and one that observes it later rewrites it as
// <table>_<destination>, the same route.
func managedNames(ctx context.Context, t *testing.T, c client.Client) []string {
	t.Helper()
	var out []string
	err := eachManaged(ctx, c, func(u *unstructured.Unstructured) error {
		external := u.GetAnnotations()["crossplane.io/external-name"]
		if u.GetKind() == "Route" {
			table, _, _ := unstructured.NestedString(u.Object, "spec", "forProvider", "routeTableId")
			destination, _, _ := unstructured.NestedString(u.Object, "spec", "forProvider", "destinationCidrBlock")
			external = table + "_" + destination
		}
		out = append(out, fmt.Sprintf("%s %s %s", u.GetKind(), u.GetName(), external))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// allSynced says which managed resources of the namespace are not both
// Synced and Ready.
func allSynced(ctx context.Context, c client.Client) error {
	var not []string
	err := eachManaged(ctx, c, func(u *unstructured.Unstructured) error {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		ok := 0
		for _, x := range conds {
			if m, _ := x.(map[string]any); (m["type"] == "Synced" || m["type"] == "Ready") && m["status"] == "True" {
				ok++
			}
		}
		if ok != 2 {
			not = append(not, u.GetKind()+"/"+u.GetName())
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(not) > 0 {
		return fmt.Errorf("not synced and ready: %s", strings.Join(not, ", "))
	}
	return nil
}

func eachManaged(ctx context.Context, c client.Client, f func(*unstructured.Unstructured) error) error {
	for group, kinds := range composedKinds {
		for _, k := range kinds {
			l := &unstructured.UnstructuredList{}
			l.SetAPIVersion(group + "/v1beta1")
			l.SetKind(k + "List")
			if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
				return err
			}
			for i := range l.Items {
				if err := f(&l.Items[i]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// startClusterctlPlane starts a plane whose CAPXP clusterctl installs, its
// logs kept when the test fails.
func startClusterctlPlane(ctx context.Context, t *testing.T, dir string, o plane.Options) *plane.Plane {
	t.Helper()
	o.Dir = dir
	o.Tools = tools.Dir(envtest.ToolsDir())
	o.Progress = func(f string, a ...any) { t.Logf("plane %s: "+f, append([]any{filepath.Base(dir)}, a...)...) }
	p, err := plane.Start(ctx, o)
	if err != nil {
		t.Fatalf("%v\n(make test-aws builds what is missing)", err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			keep := filepath.Join(os.TempDir(), "capxp-aws-move-logs", filepath.Base(dir))
			_ = os.RemoveAll(keep)
			_ = os.MkdirAll(filepath.Dir(keep), 0o750)
			if err := os.Rename(p.Dir(), keep); err == nil {
				t.Logf("the plane's logs are in %s", keep)
			}
		}
	})
	return p
}
