// Package inplace runs CAPI's in-place updates against CAPXP's extension on
// a plane whose CAPI core and KubeadmControlPlane controllers run as CAPI
// ships them, with their RuntimeSDK and InPlaceUpdates features on
// (plane.Options.InPlaceUpdates).
package inplace

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/dev/lifeline"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/plan"
	"github.com/capxp/cluster-api-provider-crossplane/test/planesuite"
	"github.com/capxp/cluster-api-provider-crossplane/test/planner"
	"github.com/capxp/cluster-api-provider-crossplane/test/wait"
)

var (
	p *plane.Plane
	// bin holds the commands the suite built.
	bin   string
	waits = wait.Options{Every: time.Second, Logs: func() string { return p.Dir() }}
)

func TestMain(m *testing.M) {
	lifeline.Main()
	os.Exit(planesuite.Run(m, "inplace", []string{"./cmd/capxp", "./cmd/function-asg-instances"}, plane.Options{InPlaceUpdates: true},
		func(s planesuite.Suite) { p, bin = s.Plane, s.Bin }))
}

const (
	ns      = "capxp-classy"
	cluster = "classy"
	// workers is the Cluster's MachineDeployment topology.
	workers = "md-0"
	// instanceType is the Node label the local Composition maps the size to.
	instanceType = "node.kubernetes.io/instance-type"
)

// A ClusterClass variable changed on a Cluster of the class
// crossplane-local: the workers' size, which the local Composition declares
// in place (a label of the running Node), reaches every worker without
// replacing one. Then the class's workers take another image, which it does
// not declare: CAPI replaces them, as it always has.
func TestClusterClassChangeInPlace(t *testing.T) {
	ctx := t.Context()
	c := p.Management().Client
	available(t, "topology")

	// Updated in place only when a worker may go: CAPI otherwise surges
	// one new machine first.
	setTopology(t, c, func(cl *clusterv1.Cluster) {
		u := &cl.Spec.Topology.Workers.MachineDeployments[0].Rollout.Strategy
		u.Type = clusterv1.RollingUpdateMachineDeploymentStrategyType
		u.RollingUpdate.MaxSurge = new(intstr.FromInt32(0))
		u.RollingUpdate.MaxUnavailable = new(intstr.FromInt32(1))
	})
	running := workerMachines(t, c)

	// capxp plan, as a read-only planner, predicts both changes as CAPI
	// then makes them.
	if err := planner.Bind(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	sized := clusterChange(t, c, func(cl *clusterv1.Cluster) { setVariable(t, cl, "workerMachineSize", "large") })
	predicted(t, "the workers' size", sized, running, plan.UpdatedInPlace)

	start := time.Now()
	setTopology(t, c, func(cl *clusterv1.Cluster) { setVariable(t, cl, "workerMachineSize", "large") })
	waitFor(t, "every worker of the new size, none replaced", 4*time.Minute, func() error {
		now := workerMachines(t, c)
		if !slices.Equal(now, running) {
			return fmt.Errorf("the workers are %v, were %v: a Machine was replaced", now, running)
		}
		return workersAre(ctx, c, now, "large", "")
	})
	t.Logf("in place: %d workers took the new size in %s, none replaced", len(running), time.Since(start).Round(time.Second))

	// The class's workers on a template with another image, which the
	// local Composition does not declare in place: CAPI replaces them.
	imaged := workersImaged(t, c, "local-2")
	predicted(t, "the class's workers on another image", imaged, running, plan.Replaced)
	apply(t, c, imaged)
	waitFor(t, "every worker replaced, of the new image", 6*time.Minute, func() error {
		now := workerMachines(t, c)
		for _, m := range now {
			if slices.Contains(running, m) {
				return fmt.Errorf("worker %s is still running: a change not declared in place replaces the workers", m)
			}
		}
		return workersAre(ctx, c, now, "large", "local-2")
	})
}

// workersImaged is the change that points the ClusterClass's worker
// class at a copy of its CrossplaneMachineTemplate with the given image:
// the copy, and the class.
func workersImaged(t *testing.T, c client.Client, image string) []*unstructured.Unstructured {
	t.Helper()
	return repointWorkers(t, c, "-"+image, func(spec map[string]any) error {
		return unstructured.SetNestedField(spec, image, "template", "spec", "parameters", "image")
	})
}

// repointWorkers is the change that points the ClusterClass's worker
// class, as read with c, at a copy of its CrossplaneMachineTemplate named
// with suffix and changed by change (the copy's spec): the copy, and the
// class.
func repointWorkers(t *testing.T, c client.Client, suffix string, change func(spec map[string]any) error) []*unstructured.Unstructured {
	t.Helper()
	ctx := t.Context()
	class := &unstructured.Unstructured{}
	class.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("ClusterClass"))
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "crossplane-local"}, class); err != nil {
		t.Fatal(err)
	}
	mds, _, _ := unstructured.NestedSlice(class.Object, "spec", "workers", "machineDeployments")
	worker := mds[0].(map[string]any)
	ref, _, _ := unstructured.NestedMap(worker, "infrastructure", "templateRef")
	old := &unstructured.Unstructured{}
	old.SetGroupVersionKind(infrav1.GroupVersion.WithKind("CrossplaneMachineTemplate"))
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref["name"].(string)}, old); err != nil {
		t.Fatal(err)
	}
	tmpl := &unstructured.Unstructured{}
	tmpl.SetGroupVersionKind(old.GroupVersionKind())
	tmpl.SetNamespace(ns)
	tmpl.SetName(old.GetName() + suffix)
	spec, _, _ := unstructured.NestedMap(old.Object, "spec")
	if err := change(spec); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedMap(tmpl.Object, spec, "spec"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(worker, tmpl.GetName(), "infrastructure", "templateRef", "name"); err != nil {
		t.Fatal(err)
	}
	edited := &unstructured.Unstructured{}
	edited.SetGroupVersionKind(class.GroupVersionKind())
	edited.SetNamespace(ns)
	edited.SetName(class.GetName())
	if err := unstructured.SetNestedSlice(edited.Object, mds, "spec", "workers", "machineDeployments"); err != nil {
		t.Fatal(err)
	}
	return []*unstructured.Unstructured{tmpl, edited}
}

// apply creates each object of a change, or merges it onto the one there.
func apply(t *testing.T, c client.Client, change []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range change {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(u.GroupVersionKind())
		err := c.Get(t.Context(), client.ObjectKeyFromObject(u), live)
		switch {
		case apierrors.IsNotFound(err):
			err = c.Create(t.Context(), u.DeepCopy())
		case err == nil:
			raw, merr := json.Marshal(u.Object)
			if merr != nil {
				t.Fatal(merr)
			}
			err = c.Patch(t.Context(), live, client.RawPatch(types.MergePatchType, raw))
		}
		if err != nil {
			t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// clusterChange is the Cluster as change leaves it, as a change to plan:
// its topology, whole.
func clusterChange(t *testing.T, c client.Client, change func(*clusterv1.Cluster)) []*unstructured.Unstructured {
	t.Helper()
	cl := &clusterv1.Cluster{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: cluster}, cl); err != nil {
		t.Fatal(err)
	}
	change(cl)
	topology, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cl.Spec.Topology)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("Cluster"))
	u.SetNamespace(ns)
	u.SetName(cluster)
	if err := unstructured.SetNestedMap(u.Object, topology, "spec", "topology"); err != nil {
		t.Fatal(err)
	}
	return []*unstructured.Unstructured{u}
}

// predicted plans change as the read-only planner and checks that it
// predicts verdict for each of the running workers.
func predicted(t *testing.T, what string, change []*unstructured.Unstructured, workers []string, verdict plan.Verdict) {
	t.Helper()
	var docs []string
	for _, u := range change {
		raw, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(raw))
	}
	got, out, _, err := planner.Run(t.Context(), bin, planner.Args(p.Kubeconfig(), bin, ns), strings.Join(docs, "---\n"))
	if err != nil {
		t.Fatalf("plan %s: %v", what, err)
	}
	found := 0
	for _, cl := range got.Clusters {
		for _, m := range cl.Machines {
			if !slices.Contains(workers, m.Name) {
				continue
			}
			found++
			if m.Verdict != verdict {
				t.Errorf("plan %s: worker %s predicted %s (%s), want %s\n%s", what, m.Name, m.Verdict, strings.Join(m.Reasons, "; "), verdict, out)
			}
		}
	}
	if found != len(workers) {
		t.Errorf("plan %s: %d of the workers %v predicted\n%s", what, found, workers, out)
	}
	t.Logf("plan %s: %s", what, got.Clusters[0].Summary())
}

// setTopology changes the Cluster's topology.
func setTopology(t *testing.T, c client.Client, change func(*clusterv1.Cluster)) {
	t.Helper()
	cl := &clusterv1.Cluster{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: cluster}, cl); err != nil {
		t.Fatal(err)
	}
	before := cl.DeepCopy()
	change(cl)
	if err := c.Patch(t.Context(), cl, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

// setVariable sets one of the Cluster's topology variables.
func setVariable(t *testing.T, cl *clusterv1.Cluster, name string, value any) {
	t.Helper()
	raw, err := json.Marshal(value)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cl.Spec.Topology.Variables {
		if cl.Spec.Topology.Variables[i].Name == name {
			cl.Spec.Topology.Variables[i].Value = extv1.JSON{Raw: raw}
			return
		}
	}
	cl.Spec.Topology.Variables = append(cl.Spec.Topology.Variables, clusterv1.ClusterVariable{Name: name, Value: extv1.JSON{Raw: raw}})
}

// available applies the named example, waits until it is Available, and
// until CAPI has discovered CAPXP's hooks.
func available(t *testing.T, name string) {
	t.Helper()
	e, err := plane.ExampleNamed(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ApplyNamedExample(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitForExampleAvailable(t.Context(), e.Cluster, e.Machines, 5*time.Minute, func(st plane.Status) { t.Log(strings.Join(st.Lines, "\n")) }); err != nil {
		t.Fatal(err)
	}
	registered(t, p.Management().Client)
}

// registered waits for CAPI to have discovered CAPXP's hooks through the
// ExtensionConfig the manager registers.
func registered(t *testing.T, c client.Client) {
	t.Helper()
	waitFor(t, "CAPI to discover CAPXP's hooks", time.Minute, func() error {
		ec := &runtimev1.ExtensionConfig{}
		if err := c.Get(t.Context(), client.ObjectKey{Name: "capxp"}, ec); err != nil {
			return err
		}
		var names []string
		for _, h := range ec.Status.Handlers {
			names = append(names, h.Name)
		}
		for _, want := range []string{"can-update-machine-set.capxp", "can-update-machine.capxp", "update-machine.capxp"} {
			if !slices.Contains(names, want) {
				return fmt.Errorf("CAPI discovered %v, not %s", names, want)
			}
		}
		return nil
	})
}

// workerMachines are the names of the MachineDeployment's Machines, sorted.
func workerMachines(t *testing.T, c client.Client) []string {
	t.Helper()
	list := &clusterv1.MachineList{}
	if err := c.List(t.Context(), list, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster, clusterv1.ClusterTopologyMachineDeploymentNameLabel: workers}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range list.Items {
		names = append(names, list.Items[i].Name)
	}
	slices.Sort(names)
	return names
}

// workersAre says what keeps the given workers from being done: each XR
// of the size and image (none when empty), and its Node labelled with the
// size;
// the MachineDeployment rolled out, every Machine up to date and none
// updating.
func workersAre(ctx context.Context, c client.Client, machines []string, size, image string) error {
	mds := &clusterv1.MachineDeploymentList{}
	if err := c.List(ctx, mds, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster, clusterv1.ClusterTopologyMachineDeploymentNameLabel: workers}); err != nil {
		return err
	}
	if len(mds.Items) != 1 {
		return fmt.Errorf("%d MachineDeployments of topology %s", len(mds.Items), workers)
	}
	md := &mds.Items[0]
	want := ptrValue(md.Spec.Replicas)
	if len(machines) != int(want) || ptrValue(md.Status.UpToDateReplicas) != want || ptrValue(md.Status.AvailableReplicas) != want {
		return fmt.Errorf("MachineDeployment %s: %d Machines, %d up to date, %d available, want %d", md.Name, len(machines), ptrValue(md.Status.UpToDateReplicas), ptrValue(md.Status.AvailableReplicas), want)
	}
	for _, name := range machines {
		if _, err := machineIs(ctx, c, ns, name, size, image); err != nil {
			return err
		}
	}
	return nil
}

// machineIs says what keeps a Machine from being done, and returns it: not
// updating, its XR of the size and image, and its Node labelled with the
// size.
func machineIs(ctx context.Context, c client.Client, namespace, name, size, image string) (*clusterv1.Machine, error) {
	m := &clusterv1.Machine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, m); err != nil {
		return nil, err
	}
	if _, updating := m.Annotations[clusterv1.UpdateInProgressAnnotation]; updating {
		return nil, fmt.Errorf("Machine %s is being updated in place: %s", name, updatingMessage(m))
	}
	xr := &infrav1.CrossplaneMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: m.Spec.InfrastructureRef.Name}, xr); err != nil {
		return nil, err
	}
	if xr.Spec.Parameters.Size != size || xr.Spec.Parameters.Image != image {
		return nil, fmt.Errorf("CrossplaneMachine %s is of size %q and image %q, want %q and %q", xr.Name, xr.Spec.Parameters.Size, xr.Spec.Parameters.Image, size, image)
	}
	if !m.Status.NodeRef.IsDefined() {
		return nil, fmt.Errorf("Machine %s has no Node", name)
	}
	node := &corev1.Node{}
	if err := p.Workload.Client.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node); err != nil {
		return nil, err
	}
	if got := node.Labels[instanceType]; got != size {
		return nil, fmt.Errorf("Node %s is labelled %s=%q, want %q", node.Name, instanceType, got, size)
	}
	return m, nil
}

// updatingMessage is the message of a Machine's Updating condition, where
// CAPI shows what the UpdateMachine hook answered.
func updatingMessage(m *clusterv1.Machine) string {
	for _, c := range m.Status.Conditions {
		if c.Type == clusterv1.MachineUpdatingCondition {
			return c.Reason + ": " + c.Message
		}
	}
	return "no Updating condition"
}

func ptrValue(v *int32) int32 {
	if v == nil {
		return 0
	}
	return *v
}

// waitFor polls ok until it returns nil, logging each new reason it is
// not yet, and fails the test with its last error after within.
func waitFor(t *testing.T, what string, within time.Duration, ok func() error) {
	t.Helper()
	var last string
	waits.Eventually(t, what, within, func() error {
		err := ok()
		if err != nil && err.Error() != last {
			last = err.Error()
			t.Log(last)
		}
		return err
	})
}
