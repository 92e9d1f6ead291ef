// Package e2e runs CAPXP end to end on the real local management plane
// (dev/plane): Crossplane core composing with the real functions and
// provider-kubernetes, CAPI's core controllers, and the capxp manager binary.
// It also checks the capxp-dev binary runs outside a checkout.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capxp/cluster-api-provider-crossplane/dev/lifeline"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
	"github.com/capxp/cluster-api-provider-crossplane/test/planesuite"
)

var (
	p *plane.Plane
	// bin holds the capxp and capxp-dev binaries built for the run.
	bin string
)

func TestMain(m *testing.M) {
	// The plane starts etcd and kube-apiserver through links to this test
	// binary, so that they die with it.
	lifeline.Main()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	return planesuite.Run(m, "e2e", []string{"./cmd/capxp", "./cmd/capxp-dev", "./cmd/function-asg-instances"}, plane.Options{AuditManagement: true}, func(s planesuite.Suite) {
		p, bin = s.Plane, s.Bin
	})
}

// TestDevBinary runs capxp-dev outside the checkout: it finds the tools
// directory it is given and its manager beside it, and says exactly what is
// missing from an empty tools directory.
func TestDevBinary(t *testing.T) {
	dev := filepath.Join(bin, "capxp-dev")
	cwd := t.TempDir()
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(t.Context(), dev, args...)
		cmd.Dir = cwd
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("--help"); err != nil || !strings.Contains(out, "--tools-dir") {
		t.Errorf("capxp-dev --help: %v\n%s", err, out)
	}
	toolsDir, err := filepath.Abs(envtest.ToolsDir())
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run("--check", "--tools-dir", toolsDir); err != nil {
		t.Errorf("capxp-dev --check with the tools directory of this run: %v\n%s", err, out)
	}
	out, err := run("--check", "--tools-dir", t.TempDir())
	if err == nil {
		t.Fatalf("capxp-dev --check with an empty tools directory succeeded:\n%s", out)
	}
	for _, want := range []string{"hack/ensure-tools.sh", "crossplane", "crds", "provider-kubernetes", "function-patch-and-transform", "--tools-dir"} {
		if !strings.Contains(out, want) {
			t.Errorf("capxp-dev --check with an empty tools directory does not mention %q:\n%s", want, out)
		}
	}
}

// TestLocalCluster runs the life of examples/local on the plane, step by
// step: provision until CAPI reports the cluster Available, pause, swap the
// composition, scale, roll the workers out, delete.
func TestLocalCluster(t *testing.T) {
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"Provision", provision},
		{"PauseStopsComposing", pause},
		{"SwapCompositionLocalToBYO", swap},
		{"ScaleMachineDeployment", scale},
		{"RolloutReplacesEveryWorker", rollout},
		{"NewRevisionReachesMachinesOnlyByRollout", newRevision},
		{"RemediationReplacesBrokenWorkers", remediate},
		{"DeleteLeavesNothing", deleteCluster},
	}
	revisions, writes := watchRevisions(t), watchWriters(t, plane.ExampleNamespace)
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) {
			s.run(t)
			// Every step ends with Crossplane responsive on every XR, and
			// no running machine XR moved to another Composition revision.
			responsive(t, plane.ExampleNamespace, writes)
			revisions.inPlace(t)
		}) {
			return // later steps build on this one
		}
	}
}

// provision applies examples/local and waits until CAPI reports the
// infrastructure provisioned and every Machine has a providerID and a Node.
func provision(t *testing.T) {
	if err := p.ApplyExample(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitForExample(t, plane.ExampleMachines, 90*time.Second)
	waitForAvailable(t, plane.ExampleMachines)
}

// waitForAvailable waits up to a minute for CAPI to report the example
// Available with machines Machines, each Ready and Available, and finds
// each Machine's XR and Node and nothing else: as many CrossplaneMachines
// as composed Objects (a Node each) and as Nodes as Machines, every Node
// Ready.
func waitForAvailable(t *testing.T, machines int) {
	t.Helper()
	waitForExampleAvailable(t, plane.Examples[0], machines, time.Minute)
	eventually(t, "one CrossplaneMachine and one Ready Node per Machine", 15*time.Second, func() error {
		if n := len(list(t, "infrastructure.cluster.x-k8s.io/v1alpha1", "CrossplaneMachine")); n != machines {
			return fmt.Errorf("%d CrossplaneMachines for %d Machines", n, machines)
		}
		if n := len(objects(t, "crossplanemachine")); n != machines {
			return fmt.Errorf("%d composed Objects for %d Machines", n, machines)
		}
		nodes := &corev1.NodeList{}
		if err := p.Workload.Client.List(t.Context(), nodes); err != nil {
			return err
		}
		if len(nodes.Items) != machines {
			return fmt.Errorf("%d Nodes for %d Machines", len(nodes.Items), machines)
		}
		for i := range nodes.Items {
			if !nodeReady(&nodes.Items[i]) {
				return fmt.Errorf("Node %s is not Ready", nodes.Items[i].Name)
			}
		}
		return nil
	})
}

// nodeReady reports whether a Node's Ready condition is True.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitForExample waits up to within for the example to have machines
// provisioned Machines with Nodes.
func waitForExample(t *testing.T, machines int, within time.Duration) {
	t.Helper()
	start := time.Now()
	defer func() {
		t.Logf("the example had %d machines ready after %s", machines, time.Since(start).Round(100*time.Millisecond))
	}()
	err := p.WaitForExample(t.Context(), machines, within, func(st plane.Status) {
		for _, l := range st.Lines {
			t.Log(l)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// pause: a paused Cluster pauses its XRs in Crossplane, which then composes
// nothing: a new failure domain reaches the XR's status only once the
// Cluster is unpaused.
func pause(t *testing.T) {
	setPaused(t, true)
	eventually(t, "Crossplane reports every XR paused", 10*time.Second, func() error {
		for _, xr := range xrs(t) {
			if r := condition(xr, "Synced")["reason"]; r != "ReconcilePaused" {
				return fmt.Errorf("%s %s: Synced reason %v", xr.GetKind(), xr.GetName(), r)
			}
		}
		return nil
	})
	xr := clusterXR(t)
	fds, _, _ := unstructured.NestedSlice(xr.Object, "spec", "parameters", "failureDomains")
	fds = append(fds, map[string]any{"name": "zone-c", "controlPlane": true})
	patch(t, xr, map[string]any{"spec": map[string]any{"parameters": map[string]any{"failureDomains": fds}}})
	consistently(t, "paused, the composition does not report the new failure domain", 3*time.Second, func() error {
		if n := len(statusFailureDomains(t)); n != 2 {
			return fmt.Errorf("status.failureDomains has %d entries", n)
		}
		return nil
	})
	setPaused(t, false)
	eventually(t, "unpaused, the composition reports zone-c", 10*time.Second, func() error {
		if n := len(statusFailureDomains(t)); n != 3 {
			return fmt.Errorf("status.failureDomains has %d entries", n)
		}
		return nil
	})
	waitForExample(t, plane.ExampleMachines, 15*time.Second)
}

// swap moves the running cluster from the local Composition to the
// bring-your-own one by changing the XR alone: Crossplane removes what the
// local Composition composed, the endpoint stays, and no CAPI object is
// written.
func swap(t *testing.T) {
	cluster := capiCluster(t)
	before := cluster.GetResourceVersion()
	xr := clusterXR(t)
	patch(t, xr, map[string]any{"spec": map[string]any{"crossplane": map[string]any{
		"compositionRef": map[string]any{"name": "crossplanecluster-byo"},
	}}})
	eventually(t, "the cluster XR is composed by crossplanecluster-byo, ready, with nothing composed", 15*time.Second, func() error {
		xr := clusterXR(t)
		ref, _, _ := unstructured.NestedString(xr.Object, "spec", "crossplane", "compositionRef", "name")
		refs, _, _ := unstructured.NestedSlice(xr.Object, "spec", "crossplane", "resourceRefs")
		if ref != "crossplanecluster-byo" || len(refs) != 0 || condition(*xr, "Ready")["status"] != "True" {
			return fmt.Errorf("composition %s, %d composed resources, Ready %v", ref, len(refs), condition(*xr, "Ready"))
		}
		if n := len(objects(t, "crossplanecluster")); n != 0 {
			return fmt.Errorf("%d Objects of the cluster remain", n)
		}
		return nil
	})
	waitForExample(t, plane.ExampleMachines, 15*time.Second)
	after := capiCluster(t)
	if got, want := endpointOf(after), endpointOf(cluster); got != want {
		t.Errorf("the endpoint moved from %s to %s", want, got)
	}
	if after.GetGeneration() != cluster.GetGeneration() {
		t.Errorf("the Cluster's spec changed (generation %d to %d; resourceVersion %s)", cluster.GetGeneration(), after.GetGeneration(), before)
	}
}

// scale adds a worker: CAPI creates a Machine, the bridge gates and feeds
// its XR, and a fourth Node registers.
func scale(t *testing.T) {
	md := &unstructured.Unstructured{}
	md.SetAPIVersion("cluster.x-k8s.io/v1beta2")
	md.SetKind("MachineDeployment")
	md.SetNamespace(plane.ExampleNamespace)
	md.SetName("demo-workers")
	// From 2 workers to 5, to none, and back: each time the cluster is
	// Available again with exactly the XRs and Nodes of its Machines.
	for _, workers := range []int{5, 0, 2} {
		patch(t, md, map[string]any{"spec": map[string]any{"replicas": workers}})
		waitForAvailable(t, plane.ExampleMachines-2+workers)
	}
}

// rollout restarts the workers as `clusterctl alpha rollout restart` does
// (spec.rollout.after): CAPI replaces every worker Machine, and with it its
// XR, what the XR composed and its Node; the cluster is Available again
// with nothing of the old workers left.
func rollout(t *testing.T) {
	old := map[string]bool{}
	for _, m := range workerMachines(t) {
		old[m.GetName()] = true
	}
	md := &unstructured.Unstructured{}
	md.SetAPIVersion("cluster.x-k8s.io/v1beta2")
	md.SetKind("MachineDeployment")
	md.SetNamespace(plane.ExampleNamespace)
	md.SetName("demo-workers")
	patch(t, md, map[string]any{"spec": map[string]any{"rollout": map[string]any{"after": time.Now().UTC().Format(time.RFC3339)}}})
	eventually(t, "every worker Machine is replaced", 90*time.Second, func() error {
		ms := workerMachines(t)
		for _, m := range ms {
			if old[m.GetName()] {
				return fmt.Errorf("Machine %s is not replaced yet", m.GetName())
			}
		}
		if len(ms) != 2 {
			return fmt.Errorf("%d worker Machines", len(ms))
		}
		return nil
	})
	waitForAvailable(t, plane.ExampleMachines)
	for _, xr := range list(t, "infrastructure.cluster.x-k8s.io/v1alpha1", "CrossplaneMachine") {
		if old[xr.GetName()] {
			t.Errorf("the XR of replaced Machine %s is left", xr.GetName())
		}
	}
	for _, o := range objects(t, "crossplanemachine") {
		for _, ref := range o.GetOwnerReferences() {
			if old[ref.Name] {
				t.Errorf("Object %s of replaced Machine %s is left", o.GetName(), ref.Name)
			}
		}
	}
}

// workerMachines are the example's MachineDeployment's Machines.
func workerMachines(t *testing.T) []unstructured.Unstructured {
	t.Helper()
	var out []unstructured.Unstructured
	for _, m := range list(t, "cluster.x-k8s.io/v1beta2", "Machine") {
		if m.GetLabels()[clusterv1.MachineDeploymentNameLabel] == "demo-workers" {
			out = append(out, m)
		}
	}
	return out
}

// deleteCluster deletes the Cluster and finds nothing left: no XR, no
// composed Object, no Node.
func deleteCluster(t *testing.T) {
	ctx := t.Context()
	if err := p.Management().Client.Delete(ctx, capiCluster(t)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "nothing is left", 90*time.Second, func() error {
		if err := p.Management().Client.Get(ctx, client.ObjectKey{Namespace: plane.ExampleNamespace, Name: plane.ExampleCluster}, &clusterv1.Cluster{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Cluster still exists (%v)", err)
		}
		if n := len(xrs(t)); n != 0 {
			return fmt.Errorf("%d XRs remain", n)
		}
		if n := len(objects(t, "")); n != 0 {
			return fmt.Errorf("%d composed Objects remain", n)
		}
		nodes := &corev1.NodeList{}
		if err := p.Workload.Client.List(ctx, nodes); err != nil {
			return err
		}
		if len(nodes.Items) != 0 {
			return fmt.Errorf("%d Nodes remain in the workload cluster", len(nodes.Items))
		}
		return nil
	})
}
