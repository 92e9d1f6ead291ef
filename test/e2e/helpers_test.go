package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capxp/cluster-api-provider-crossplane/controllers/composed"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/test/wait"
	"github.com/capxp/cluster-api-provider-crossplane/test/writers"
)

const interval = 250 * time.Millisecond

// eventually and consistently wait as every e2e test does: polling every
// interval, naming the plane's logs when what they wait for fails.
var eventually, consistently = waits.Eventually, waits.Consistently

var waits = wait.Options{Every: interval, Logs: func() string { return p.Dir() }}

// patch merge-patches an object.
func patch(t *testing.T, o *unstructured.Unstructured, p map[string]any) {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := mgmt().Patch(t.Context(), o, client.RawPatch(types.MergePatchType, raw)); err != nil {
		t.Fatalf("cannot patch %s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

func mgmt() client.Client { return p.Management().Client }

func list(t *testing.T, apiVersion, kind string) []unstructured.Unstructured {
	t.Helper()
	return listOf(t, plane.ExampleNamespace, apiVersion, kind)
}

// xrs are the example's CrossplaneClusters and CrossplaneMachines.
func xrs(t *testing.T) []unstructured.Unstructured {
	t.Helper()
	return append(list(t, "infrastructure.cluster.x-k8s.io/v1alpha1", "CrossplaneCluster"),
		list(t, "infrastructure.cluster.x-k8s.io/v1alpha1", "CrossplaneMachine")...)
}

// objects are the provider-kubernetes Objects composed for XRs of a kind
// (lower case), or for any XR.
func objects(t *testing.T, kind string) []unstructured.Unstructured {
	t.Helper()
	var out []unstructured.Unstructured
	for _, o := range list(t, "kubernetes.m.crossplane.io/v1alpha1", "Object") {
		for _, ref := range o.GetOwnerReferences() {
			if kind == "" || strings.EqualFold(ref.Kind, kind) {
				out = append(out, o)
				break
			}
		}
	}
	return out
}

func clusterXR(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	return clusterXROf(t, plane.ExampleNamespace, plane.ExampleCluster)
}

// clusterXROf reads a cluster's CrossplaneCluster.
func clusterXROf(t *testing.T, ns, cluster string) *unstructured.Unstructured {
	t.Helper()
	xr := &unstructured.Unstructured{}
	xr.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1alpha1")
	xr.SetKind("CrossplaneCluster")
	if err := mgmt().Get(t.Context(), client.ObjectKey{Namespace: ns, Name: cluster}, xr); err != nil {
		t.Fatal(err)
	}
	return xr
}

func capiCluster(t *testing.T) *clusterv1.Cluster {
	t.Helper()
	c := &clusterv1.Cluster{}
	if err := mgmt().Get(t.Context(), client.ObjectKey{Namespace: plane.ExampleNamespace, Name: plane.ExampleCluster}, c); err != nil {
		t.Fatal(err)
	}
	return c
}

func setPaused(t *testing.T, paused bool) {
	t.Helper()
	c := capiCluster(t)
	raw := fmt.Sprintf(`{"spec":{"paused":%t}}`, paused)
	if err := mgmt().Patch(t.Context(), c, client.RawPatch(types.MergePatchType, []byte(raw))); err != nil {
		t.Fatal(err)
	}
}

func statusFailureDomains(t *testing.T) []any {
	t.Helper()
	fds, _, _ := unstructured.NestedSlice(clusterXR(t).Object, "status", "failureDomains")
	return fds
}

func endpointOf(c *clusterv1.Cluster) string {
	return fmt.Sprintf("%s:%d", c.Spec.ControlPlaneEndpoint.Host, c.Spec.ControlPlaneEndpoint.Port)
}

func condition(o unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return map[string]any{}
}

// responsive checks that the bridge never opened Crossplane's watch circuit
// breaker on an XR in namespace ns by flooding it with updates. The breaker
// charges an XR every update of it, whoever wrote it, and under load
// Crossplane's own status writes can fill it alone (docs/bridge.md, "Crossplane
// also swings its own conditions back"). So where a circuit is open, w counts
// the XR's updates in the two minutes before it opened, by writer: the test
// fails if one in five or more were the bridge's, and otherwise logs the
// counts as Crossplane's own.
func responsive(t *testing.T, ns string, w *writers.Log) {
	t.Helper()
	for _, xr := range append(listOf(t, ns, "infrastructure.cluster.x-k8s.io/v1alpha1", "CrossplaneCluster"),
		listOf(t, ns, "infrastructure.cluster.x-k8s.io/v1alpha1", "CrossplaneMachine")...) {
		c := condition(xr, "Responsive")
		if c == nil || c["status"] == "True" {
			continue
		}
		opened, err := time.Parse(time.RFC3339, fmt.Sprint(c["lastTransitionTime"]))
		if err != nil {
			t.Errorf("Crossplane's watch circuit opened on %s %s: %v", xr.GetKind(), xr.GetName(), c)
			continue
		}
		u := w.Before(xr.GetUID(), opened.Add(time.Second), 2*time.Minute)
		if u.Total == 0 || u.Of(composed.FieldManager)*5 >= u.Total {
			t.Errorf("the bridge opened Crossplane's watch circuit on %s %s: %v; %s", xr.GetKind(), xr.GetName(), c, u)
			continue
		}
		t.Logf("Crossplane's own updates opened its watch circuit on %s %s: %v; %s", xr.GetKind(), xr.GetName(), c, u)
	}
}

// applyExample applies one of plane.Examples as it is.
func applyExample(t *testing.T, name string) plane.Example {
	t.Helper()
	e, err := plane.ExampleNamed(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ApplyNamedExample(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	return e
}

// availableExample applies one of plane.Examples and waits up to within for
// CAPI to report it Available.
func availableExample(t *testing.T, name string, within time.Duration) plane.Example {
	t.Helper()
	e := applyExample(t, name)
	waitForExampleAvailable(t, e, e.Machines, within)
	return e
}

// availableCopy applies the first of plane.Examples as a cluster of its own,
// named name, and waits up to within for CAPI to report it Available.
func availableCopy(t *testing.T, name string, within time.Duration) plane.Example {
	t.Helper()
	e := plane.Examples[0]
	e.Cluster = name
	if err := p.ApplyExampleAs(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	waitForExampleAvailable(t, e, plane.ExampleMachines, within)
	return e
}

// provisionedExample applies one of plane.Examples and waits up to within
// for all its machines to be provisioned.
func provisionedExample(t *testing.T, name string, within time.Duration) plane.Example {
	t.Helper()
	e := applyExample(t, name)
	waitForMachines(t, e, e.Machines, within)
	return e
}

// waitForMachines waits up to within for an example to have machines
// provisioned Machines with Nodes, logging its state as it changes.
func waitForMachines(t *testing.T, e plane.Example, machines int, within time.Duration) {
	t.Helper()
	waitForState(t, e, machines, within, p.WaitForExampleOf, "%d machines provisioned")
}

// waitForExampleAvailable waits up to within for CAPI to report an example
// Available with machines Machines, each Ready and Available.
func waitForExampleAvailable(t *testing.T, e plane.Example, machines int, within time.Duration) {
	t.Helper()
	waitForState(t, e, machines, within, p.WaitForExampleAvailable, "Available with %d machines")
}

// waitForState waits with one of the plane's waits, logging the example's
// state as it changes, and then how long it took to be what says says.
func waitForState(t *testing.T, e plane.Example, machines int, within time.Duration,
	wait func(context.Context, string, int, time.Duration, func(plane.Status)) error, says string) {
	t.Helper()
	start := time.Now()
	if err := wait(t.Context(), e.Cluster, machines, within, func(st plane.Status) {
		for _, l := range st.Lines {
			t.Log(l)
		}
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("examples/%s: "+says+" after %s", e.Name, machines, time.Since(start).Round(100*time.Millisecond))
}

// noneLeft says how many objects of a list's kind remain, if any do.
func noneLeft(ctx context.Context, c client.Client, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.List(ctx, list, opts...); err != nil {
		return err
	}
	if n := meta.LenList(list); n != 0 {
		return fmt.Errorf("%d %s remain", n, strings.TrimSuffix(reflect.TypeOf(list).Elem().Name(), "List")+"s")
	}
	return nil
}

// listOf lists the objects of an unstructured kind in a namespace.
func listOf(t *testing.T, ns, apiVersion, kind string) []unstructured.Unstructured {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(apiVersion)
	l.SetKind(kind + "List")
	if err := mgmt().List(t.Context(), l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// deleteExampleCluster deletes an example's Cluster and waits up to within
// until it is gone and left() finds nothing else left.
func deleteExampleCluster(t *testing.T, e plane.Example, within time.Duration, left func() error) {
	t.Helper()
	ctx := t.Context()
	cluster := &clusterv1.Cluster{}
	if err := mgmt().Get(ctx, client.ObjectKey{Namespace: e.Namespace(), Name: e.Cluster}, cluster); err != nil {
		t.Fatal(err)
	}
	if err := mgmt().Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	eventually(t, "nothing of the cluster is left", within, func() error {
		if err := mgmt().Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Cluster still exists (%v)", err)
		}
		return left()
	})
}
