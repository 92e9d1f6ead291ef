package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	xrctrl "github.com/capxp/cluster-api-provider-crossplane/controllers/xr"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
)

// TestClusterClass runs examples/topology: a Cluster of the release's
// ClusterClass crossplane-local, which CAPI's topology controller turns into
// a CrossplaneCluster, a KubeadmControlPlane of CrossplaneMachines and a
// MachineDeployment of them. Through spec.topology alone it scales the
// workers, changes a variable, rebases the Cluster onto crossplane-byo and
// back (the infrastructure is composed by the other backend's Composition,
// and no machine is replaced), and changes the machines' size (a new
// template for each, and a machine of the new size).
func TestClusterClass(t *testing.T) {
	ctx := t.Context()
	topology, err := plane.ExampleNamed("topology")
	if err != nil {
		t.Fatal(err)
	}
	ns := topology.Namespace()
	writes := watchWriters(t, ns)
	e := provisionedExample(t, "topology", 3*time.Minute)
	waitForExampleAvailable(t, e, e.Machines, time.Minute)
	bindPlanner(t, ns)

	cluster := &clusterv1.Cluster{}
	if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: e.Cluster}, cluster); err != nil {
		t.Fatal(err)
	}
	infra := func() *unstructured.Unstructured {
		t.Helper()
		xr := &unstructured.Unstructured{}
		xr.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1alpha1")
		xr.SetKind("CrossplaneCluster")
		if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.Spec.InfrastructureRef.Name}, xr); err != nil {
			t.Fatal(err)
		}
		return xr
	}
	// The class's variables, patched into the cluster's infrastructure.
	xr := infra()
	pc, _, _ := unstructured.NestedString(xr.Object, "spec", "providerConfigRef", "name")
	region, _, _ := unstructured.NestedString(xr.Object, "spec", "parameters", "region")
	if _, owned := xr.GetLabels()[clusterv1.ClusterTopologyOwnedLabel]; pc != "workload" || region != "dc-1" || !owned {
		t.Errorf("CrossplaneCluster %s: providerConfigRef %q, region %q, labels %v: not the class's, patched with the Cluster's variables", xr.GetName(), pc, region, xr.GetLabels())
	}
	// Machines take the cluster's region, as any machine without one of its
	// own does.
	machineXRs := func() []unstructured.Unstructured {
		return listOf(t, ns, "infrastructure.cluster.x-k8s.io/v1alpha1", "CrossplaneMachine")
	}
	for _, m := range machineXRs() {
		if r, _, _ := unstructured.NestedString(m.Object, "spec", "network", "region"); r != "dc-1" {
			t.Errorf("CrossplaneMachine %s: region %q, want the cluster's dc-1", m.GetName(), r)
		}
	}
	machineNames := func() []string {
		t.Helper()
		l := &clusterv1.MachineList{}
		if err := mgmt().List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		names := make([]string, 0, len(l.Items))
		for _, m := range l.Items {
			names = append(names, m.Name)
		}
		slices.Sort(names)
		return names
	}

	// Each change of the topology is planned first (capxp plan, as the
	// planner), and the plan is held against what happened once the
	// change has taken effect.
	xrName := cluster.Spec.InfrastructureRef.Name
	var plans planChecks
	change := func(step string, topologyChange map[string]any) func() {
		t.Helper()
		return plans.change(t, step, cluster.Name, []xrRef{{infrav1.CrossplaneClusterKind, xrName}}, toUnstructured(t, cluster), map[string]any{"spec": map[string]any{"topology": topologyChange}})
	}

	// Workers scale through the topology.
	happened := change("ClusterClass: the workers scaled up", map[string]any{"workers": map[string]any{
		"machineDeployments": []any{map[string]any{"class": "worker", "name": "md-0", "replicas": 3}},
	}})
	waitForMachines(t, e, e.Machines+1, 90*time.Second)
	happened()
	before := machineNames()

	// A variable changes the cluster's infrastructure in place: Crossplane
	// composes it again, and CAPI reads the new failure domains.
	happened = change("ClusterClass: a variable of the infrastructure", map[string]any{"variables": variablesWith(t, cluster, map[string]any{"failureDomains": []any{"zone-a", "zone-b", "zone-c"}})})
	eventually(t, "the Cluster has the new failure domain", 60*time.Second, func() error {
		c := &clusterv1.Cluster{}
		if err := mgmt().Get(ctx, client.ObjectKeyFromObject(cluster), c); err != nil {
			return err
		}
		for _, fd := range c.Status.FailureDomains {
			if fd.Name == "zone-c" {
				return nil
			}
		}
		return fmt.Errorf("failure domains %v", c.Status.FailureDomains)
	})
	happened()

	// Rebased onto the byo class and back: the infrastructure's Composition
	// follows the class's selector, its endpoint stays, and the machines are
	// the same ones.
	endpoint := cluster.Spec.ControlPlaneEndpoint
	for _, to := range []struct{ class, composition string }{{"crossplane-byo", "crossplanecluster-byo"}, {"crossplane-local", "crossplanecluster-local"}} {
		happened := change("ClusterClass: rebased onto "+to.class, map[string]any{"classRef": map[string]any{"name": to.class}})
		eventually(t, "the infrastructure is composed by "+to.composition, 90*time.Second, func() error {
			xr := infra()
			comp, _, _ := unstructured.NestedString(xr.Object, "spec", "crossplane", "compositionRef", "name")
			host, _, _ := unstructured.NestedString(xr.Object, "status", "outputs", "controlPlaneEndpoint", "host")
			if comp != to.composition || host != endpoint.Host {
				return fmt.Errorf("composition %q, endpoint output %q", comp, host)
			}
			if c := condition(*xr, "Ready"); c["status"] != "True" || c["observedGeneration"] != xr.GetGeneration() {
				return fmt.Errorf("not Ready at generation %d: %v", xr.GetGeneration(), c)
			}
			return nil
		})
		happened()
		if got := machineNames(); !slices.Equal(got, before) {
			t.Errorf("rebased onto %s, the machines are %v, were %v", to.class, got, before)
		}
		c := &clusterv1.Cluster{}
		if err := mgmt().Get(ctx, client.ObjectKeyFromObject(cluster), c); err != nil {
			t.Fatal(err)
		}
		if c.Spec.ControlPlaneEndpoint != endpoint {
			t.Errorf("rebased onto %s, the endpoint is %v, was %v", to.class, c.Spec.ControlPlaneEndpoint, endpoint)
		}
	}
	events := &corev1.EventList{}
	if err := mgmt().List(ctx, events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	reselected := 0
	for _, ev := range events.Items {
		if ev.Reason == xrctrl.ReselectedReason {
			reselected++
		}
	}
	if reselected != 2 {
		t.Errorf("%d %s events, want one per rebase", reselected, xrctrl.ReselectedReason)
	}

	// Variables patched into the machine templates: CAPI's topology
	// controller dry-runs the patched templates (which CAPXP's template
	// immutability lets through), then rolls each owner onto a new template
	// of the new size: the control plane and the workers are replaced, and
	// the cluster is Available again on machines of the new size alone.
	happened = change("ClusterClass: variables of the machine templates", map[string]any{"variables": variablesWith(t, cluster, map[string]any{
		"workerMachineSize": "large", "controlPlaneMachineSize": "large"})})
	templateSize := func(ref clusterv1.ContractVersionedObjectReference) (string, error) {
		tmpl := &unstructured.Unstructured{}
		tmpl.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1alpha1")
		tmpl.SetKind(ref.Kind)
		if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, tmpl); err != nil {
			return "", err
		}
		size, _, _ := unstructured.NestedString(tmpl.Object, "spec", "template", "spec", "parameters", "size")
		return size, nil
	}
	eventually(t, "the workers and the control plane roll onto templates of the new size", 90*time.Second, func() error {
		mds := &clusterv1.MachineDeploymentList{}
		if err := mgmt().List(ctx, mds, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name}); err != nil {
			return err
		}
		if len(mds.Items) != 1 {
			return fmt.Errorf("%d MachineDeployments", len(mds.Items))
		}
		if size, err := templateSize(mds.Items[0].Spec.Template.Spec.InfrastructureRef); err != nil || size != "large" {
			return fmt.Errorf("the workers' template %s: size %q (%v)", mds.Items[0].Spec.Template.Spec.InfrastructureRef.Name, size, err)
		}
		kcp := &unstructured.Unstructured{}
		kcp.SetAPIVersion(cluster.Spec.ControlPlaneRef.APIGroup + "/v1beta2")
		kcp.SetKind(cluster.Spec.ControlPlaneRef.Kind)
		if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.Spec.ControlPlaneRef.Name}, kcp); err != nil {
			return err
		}
		name, _, _ := unstructured.NestedString(kcp.Object, "spec", "machineTemplate", "spec", "infrastructureRef", "name")
		if size, err := templateSize(clusterv1.ContractVersionedObjectReference{Kind: "CrossplaneMachineTemplate", Name: name}); err != nil || size != "large" {
			return fmt.Errorf("the control plane's template %s: size %q (%v)", name, size, err)
		}
		return nil
	})
	start := time.Now()
	eventually(t, "every machine is replaced by one of the new size", 4*time.Minute, func() error {
		var small []string
		xrs := machineXRs()
		for _, m := range xrs {
			if size, _, _ := unstructured.NestedString(m.Object, "spec", "parameters", "size"); size != "large" {
				small = append(small, m.GetName())
			}
		}
		if len(small) > 0 || len(xrs) != e.Machines+1 {
			return fmt.Errorf("%d machines, of the old size: %v", len(xrs), small)
		}
		return nil
	})
	waitForExampleAvailable(t, e, e.Machines+1, 2*time.Minute)
	happened()
	t.Logf("the control plane and the workers were rolled onto the new size, and the cluster Available, after %s", time.Since(start).Round(100*time.Millisecond))
	nodes := &corev1.NodeList{}
	if err := p.Workload.Client.List(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if slices.Contains(before, n.Name) {
			t.Errorf("Node %s of a replaced machine is left", n.Name)
		}
	}
	for _, name := range machineNames() {
		if slices.Contains(before, name) {
			t.Errorf("Machine %s was not replaced", name)
		}
	}
	responsive(t, ns, writes)

	// The class itself changed: without its patch of the workers' size, the
	// workers' template is the class's again, of the template's size; CAPI
	// rotates it, and the workers alone are replaced.
	class := &unstructured.Unstructured{}
	class.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("ClusterClass"))
	if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.Spec.Topology.ClassRef.Name}, class); err != nil {
		t.Fatal(err)
	}
	patches, _, _ := unstructured.NestedSlice(class.Object, "spec", "patches")
	patches = slices.DeleteFunc(patches, func(p any) bool {
		m, _ := p.(map[string]any)
		return m["name"] == "worker-machine-size"
	})
	happened = plans.change(t, "ClusterClass: its patch of the workers' size removed", cluster.Name, []xrRef{{infrav1.CrossplaneClusterKind, xrName}}, class,
		map[string]any{"spec": map[string]any{"patches": patches}})
	eventually(t, "the workers are replaced by machines of the template's size", 4*time.Minute, func() error {
		workers := &clusterv1.MachineList{}
		if err := mgmt().List(ctx, workers, client.InNamespace(ns), client.HasLabels{clusterv1.MachineDeploymentNameLabel}); err != nil {
			return err
		}
		sizes := map[string]string{}
		xrs := machineXRs()
		for _, m := range xrs {
			sizes[m.GetName()], _, _ = unstructured.NestedString(m.Object, "spec", "parameters", "size")
		}
		var large []string
		for _, w := range workers.Items {
			if size := sizes[w.Spec.InfrastructureRef.Name]; size != "small" {
				large = append(large, w.Name+" ("+size+")")
			}
		}
		if len(large) > 0 || len(xrs) != e.Machines+1 {
			return fmt.Errorf("%d machines, workers of the class's patched size: %v", len(xrs), large)
		}
		return nil
	})
	waitForExampleAvailable(t, e, e.Machines+1, 2*time.Minute)
	happened()
	plans.report(t)

	// Deleting the Cluster deletes everything the topology created.
	deleteExampleCluster(t, e, 2*time.Minute, func() error {
		return noneLeft(ctx, mgmt(), &clusterv1.MachineList{}, client.InNamespace(ns))
	})
}

// variablesWith is a Cluster's topology variables with values set to those
// given, as a merge patch sets them (the whole list).
func variablesWith(t *testing.T, c *clusterv1.Cluster, values map[string]any) []any {
	t.Helper()
	cur := &clusterv1.Cluster{}
	if err := mgmt().Get(t.Context(), client.ObjectKeyFromObject(c), cur); err != nil {
		t.Fatal(err)
	}
	vars := make([]any, 0, len(cur.Spec.Topology.Variables)+len(values))
	set := map[string]bool{}
	for _, v := range cur.Spec.Topology.Variables {
		var val any
		if nv, ok := values[v.Name]; ok {
			val, set[v.Name] = nv, true
		} else if err := json.Unmarshal(v.Value.Raw, &val); err != nil {
			t.Fatal(err)
		}
		vars = append(vars, map[string]any{"name": v.Name, "value": val})
	}
	for _, name := range slices.Sorted(maps.Keys(values)) {
		if !set[name] {
			vars = append(vars, map[string]any{"name": name, "value": values[name]})
		}
	}
	return vars
}

func toUnstructured(t *testing.T, c *clusterv1.Cluster) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(clusterv1.GroupVersion.String())
	u.SetKind("Cluster")
	u.SetNamespace(c.Namespace)
	u.SetName(c.Name)
	return u
}
