package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
)

// revisionWatch watches the example's machine XRs for what CAPI never does
// to a running machine: moving it to another CompositionRevision in place.
type revisionWatch struct {
	mu sync.Mutex
	// first is each XR's first CompositionRevision, by UID.
	first map[types.UID]string
	// moved names every XR seen on a revision other than its first.
	moved []string
}

// watchRevisions starts a revisionWatch for the rest of the test.
func watchRevisions(t *testing.T) *revisionWatch {
	t.Helper()
	w := &revisionWatch{first: map[types.UID]string{}}
	see := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		rev, _, _ := unstructured.NestedString(u.Object, "spec", "crossplane", "compositionRevisionRef", "name")
		if rev == "" {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		switch first, seen := w.first[u.GetUID()]; {
		case !seen:
			w.first[u.GetUID()] = rev
		case first != rev:
			w.moved = append(w.moved, fmt.Sprintf("%s from %s to %s", u.GetName(), first, rev))
			w.first[u.GetUID()] = rev
		}
	}
	watchXRs(t, plane.ExampleNamespace, cache.ResourceEventHandlerFuncs{
		AddFunc:    see,
		UpdateFunc: func(_, obj any) { see(obj) },
	}, "crossplanemachines")
	return w
}

// watchXRs runs h on the events of the XRs of the given resources (plural,
// lower case, of CAPXP's infrastructure group) in namespace ns, from a
// synced cache, for the rest of the test.
func watchXRs(t *testing.T, ns string, h cache.ResourceEventHandler, resources ...string) {
	t.Helper()
	dc, err := dynamic.NewForConfig(p.Management().Config)
	if err != nil {
		t.Fatal(err)
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, ns, nil)
	for _, r := range resources {
		gvr := schema.GroupVersionResource{Group: infrav1.GroupVersion.Group, Version: infrav1.GroupVersion.Version, Resource: r}
		if _, err := f.ForResource(gvr).Informer().AddEventHandler(h); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	f.Start(stop)
	f.WaitForCacheSync(stop)
}

// inPlace fails the test for every machine XR moved to another revision.
func (w *revisionWatch) inPlace(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.moved {
		t.Errorf("a running machine XR's Composition revision changed in place: %s", m)
	}
	w.moved = nil
}

// revisionOf is the CompositionRevision a machine XR is composed with.
func revisionOf(xr unstructured.Unstructured) string {
	rev, _, _ := unstructured.NestedString(xr.Object, "spec", "crossplane", "compositionRevisionRef", "name")
	return rev
}

// machineComposition is the Composition of the example's machines.
const machineComposition = "crossplanemachine-local"

// revisionLabel is the label the changed Composition gives new Nodes.
const revisionLabel = "capxp.dev/composition-change"

// newRevision changes the machines' Composition, and finds running machines
// kept on the revision they were created with, until a rollout replaces the
// workers with machines of the new revision; the control plane machine,
// not rolled out, stays on its revision.
func newRevision(t *testing.T) {
	ctx := t.Context()
	before := map[string]string{}
	for _, xr := range list(t, "infrastructure.cluster.x-k8s.io/v1alpha1", "CrossplaneMachine") {
		if revisionOf(xr) == "" {
			t.Fatalf("CrossplaneMachine %s has no CompositionRevision", xr.GetName())
		}
		before[xr.GetName()] = revisionOf(xr)
	}

	// The change: every Node the Composition registers from now on carries
	// revisionLabel. Restored when the test ends: the plane is shared.
	comp := &unstructured.Unstructured{}
	comp.SetAPIVersion("apiextensions.crossplane.io/v1")
	comp.SetKind("Composition")
	if err := mgmt().Get(ctx, client.ObjectKey{Name: machineComposition}, comp); err != nil {
		t.Fatal(err)
	}
	original := comp.DeepCopy()
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx) // t's context ends before its cleanups run
		restored := &unstructured.Unstructured{}
		restored.SetGroupVersionKind(comp.GroupVersionKind())
		if err := mgmt().Get(ctx, client.ObjectKey{Name: machineComposition}, restored); err != nil {
			t.Error(err)
			return
		}
		restored.Object["spec"] = original.Object["spec"]
		if err := mgmt().Update(ctx, restored); err != nil {
			t.Errorf("cannot restore Composition %s: %v", machineComposition, err)
		}
	})
	if err := setNodeLabel(comp, revisionLabel, "true"); err != nil {
		t.Fatal(err)
	}
	if err := mgmt().Update(ctx, comp); err != nil {
		t.Fatal(err)
	}
	var latest string
	eventually(t, "Crossplane makes a new CompositionRevision", 15*time.Second, func() error {
		latest = latestRevision(t)
		for _, old := range before {
			if latest == old {
				return fmt.Errorf("the latest revision is still %s", latest)
			}
		}
		return nil
	})
	consistently(t, "running machines stay on their revision, their Nodes unchanged", 5*time.Second, func() error {
		for _, xr := range list(t, "infrastructure.cluster.x-k8s.io/v1alpha1", "CrossplaneMachine") {
			if got := revisionOf(xr); got != before[xr.GetName()] {
				return fmt.Errorf("CrossplaneMachine %s moved from %s to %s", xr.GetName(), before[xr.GetName()], got)
			}
		}
		return labelledNodes(t, 0)
	})

	rollout(t)
	xrs := list(t, "infrastructure.cluster.x-k8s.io/v1alpha1", "CrossplaneMachine")
	for _, xr := range xrs {
		rev, old := before[xr.GetName()]
		switch {
		case old && revisionOf(xr) != rev:
			t.Errorf("control plane machine %s moved from %s to %s without a rollout", xr.GetName(), rev, revisionOf(xr))
		case !old && revisionOf(xr) != latest:
			t.Errorf("new machine %s is on %s, want the latest revision %s", xr.GetName(), revisionOf(xr), latest)
		}
	}
	eventually(t, "the new workers' Nodes, and only theirs, carry the change", 15*time.Second, func() error {
		return labelledNodes(t, len(workerMachines(t)))
	})
}

// setNodeLabel adds a label to the Node manifest of a machine Composition's
// patch-and-transform input.
func setNodeLabel(comp *unstructured.Unstructured, key, value string) error {
	steps, _, _ := unstructured.NestedSlice(comp.Object, "spec", "pipeline")
	for _, s := range steps {
		resources, _, _ := unstructured.NestedSlice(s.(map[string]any), "input", "resources")
		for _, r := range resources {
			m := r.(map[string]any)
			if kind, _, _ := unstructured.NestedString(m, "base", "spec", "forProvider", "manifest", "kind"); kind != "Node" {
				continue
			}
			if err := unstructured.SetNestedField(m, value, "base", "spec", "forProvider", "manifest", "metadata", "labels", key); err != nil {
				return err
			}
			if err := unstructured.SetNestedSlice(s.(map[string]any), resources, "input", "resources"); err != nil {
				return err
			}
			return unstructured.SetNestedSlice(comp.Object, steps, "spec", "pipeline")
		}
	}
	return fmt.Errorf("Composition %s composes no Node", comp.GetName())
}

// latestRevision is the newest CompositionRevision of the machines'
// Composition.
func latestRevision(t *testing.T) string {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("apiextensions.crossplane.io/v1")
	l.SetKind("CompositionRevisionList")
	if err := mgmt().List(t.Context(), l, client.MatchingLabels{"crossplane.io/composition-name": machineComposition}); err != nil {
		t.Fatal(err)
	}
	var name string
	var newest int64
	for _, r := range l.Items {
		if n, _, _ := unstructured.NestedInt64(r.Object, "spec", "revision"); n > newest {
			name, newest = r.GetName(), n
		}
	}
	return name
}

// labelledNodes fails unless exactly want Nodes carry revisionLabel.
func labelledNodes(t *testing.T, want int) error {
	t.Helper()
	nodes := &corev1.NodeList{}
	if err := p.Workload.Client.List(t.Context(), nodes, client.HasLabels{revisionLabel}); err != nil {
		return err
	}
	if len(nodes.Items) != want {
		return fmt.Errorf("%d Nodes carry %s, want %d", len(nodes.Items), revisionLabel, want)
	}
	return nil
}

// remediate breaks a worker as hosts break, twice: its Node goes NotReady
// (kwok's node-not-ready stage), then another's host is gone. Each time the
// MachineHealthCheck has CAPI replace the broken machine, whose XR, composed
// Object and Node are deleted. One at a time: the check remediates at most
// half of the workers at once.
func remediate(t *testing.T) {
	breaks := []struct {
		how string
		do  func(t *testing.T, machine, node string)
	}{
		{"its Node goes NotReady", func(t *testing.T, _, node string) {
			n := &corev1.Node{}
			n.SetName(node)
			raw := []byte(`{"metadata":{"labels":{"node-not-ready.stage.kwok.x-k8s.io":"true"}}}`)
			if err := p.Workload.Client.Patch(t.Context(), n, client.RawPatch(types.MergePatchType, raw)); err != nil {
				t.Fatal(err)
			}
		}},
		{"its host is gone", hostGone},
	}
	for _, b := range breaks {
		workers := workerMachines(t)
		if len(workers) != 2 {
			t.Fatalf("%d workers, want 2", len(workers))
		}
		broken := workers[0].GetName()
		node, _, _ := unstructured.NestedString(workers[0].Object, "status", "nodeRef", "name")
		if node == "" {
			t.Fatalf("Machine %s has no Node", broken)
		}
		start := time.Now()
		b.do(t, broken, node)
		eventually(t, "the worker whose Node broke is replaced", 90*time.Second, func() error {
			ms := workerMachines(t)
			for _, m := range ms {
				if m.GetName() == broken {
					return fmt.Errorf("Machine %s is not replaced yet (%v)", broken, condition(m, "HealthCheckSucceeded"))
				}
			}
			if len(ms) != 2 {
				return fmt.Errorf("%d worker Machines", len(ms))
			}
			return nil
		})
		waitForAvailable(t, plane.ExampleMachines)
		t.Logf("a worker whose Node broke (%s) was replaced and the cluster Available after %s", b.how, time.Since(start).Round(100*time.Millisecond))
		for _, xr := range list(t, "infrastructure.cluster.x-k8s.io/v1alpha1", "CrossplaneMachine") {
			if xr.GetName() == broken {
				t.Errorf("the XR of remediated Machine %s is left", broken)
			}
		}
		for _, o := range objects(t, "crossplanemachine") {
			for _, ref := range o.GetOwnerReferences() {
				if ref.Name == broken {
					t.Errorf("Object %s of remediated Machine %s is left", o.GetName(), broken)
				}
			}
		}
		if err := p.Workload.Client.Get(t.Context(), client.ObjectKey{Name: node}, &corev1.Node{}); !apierrors.IsNotFound(err) {
			t.Errorf("Node %s of remediated Machine %s is left (%v)", node, broken, err)
		}
	}
	mhc := &unstructured.Unstructured{}
	mhc.SetAPIVersion("cluster.x-k8s.io/v1beta2")
	mhc.SetKind("MachineHealthCheck")
	eventually(t, "the MachineHealthCheck counts both workers healthy", 30*time.Second, func() error {
		if err := mgmt().Get(t.Context(), client.ObjectKey{Namespace: plane.ExampleNamespace, Name: "demo-workers"}, mhc); err != nil {
			return err
		}
		if healthy, _, _ := unstructured.NestedInt64(mhc.Object, "status", "currentHealthy"); healthy != 2 {
			return fmt.Errorf("status.currentHealthy %d", healthy)
		}
		return nil
	})
}

// hostGone breaks a worker as a host that disappears does: its Node is
// deleted and nothing registers it again. On the local backend the composed
// Object that registered the Node would create it again on its next poll,
// which a vanished host never does, so the Object is paused until CAPI has
// given up on the machine (its Machine is deleting), then resumed so that
// Crossplane can delete it with the machine's XR.
func hostGone(t *testing.T, machine, node string) {
	t.Helper()
	var host *unstructured.Unstructured
	for _, o := range objects(t, "crossplanemachine") {
		for _, ref := range o.GetOwnerReferences() {
			if ref.Name == machine {
				host = &o
			}
		}
	}
	if host == nil {
		t.Fatalf("no composed Object of Machine %s", machine)
	}
	paused := func(v any) map[string]any {
		return map[string]any{"metadata": map[string]any{"annotations": map[string]any{infrav1.CrossplanePausedAnnotation: v}}}
	}
	patch(t, host, paused("true"))
	n := &corev1.Node{}
	n.SetName(node)
	if err := p.Workload.Client.Delete(t.Context(), n); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	eventually(t, "CAPI gives up on the machine whose host is gone", 90*time.Second, func() error {
		m := &clusterv1.Machine{}
		err := mgmt().Get(t.Context(), client.ObjectKey{Namespace: plane.ExampleNamespace, Name: machine}, m)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case m.DeletionTimestamp.IsZero():
			return fmt.Errorf("Machine %s is not deleting yet (%v)", machine, conditions.Get(m, clusterv1.MachineHealthCheckSucceededCondition))
		}
		return nil
	})
	patch(t, host, paused(nil))
}
