package e2e

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
)

// TestManagedControlPlane runs examples/managed: a Cluster whose
// controlPlaneRef is a CrossplaneControlPlane composed by the local backend
// (the workload API server as the managed service), with a
// MachineDeployment of two workers and a MachinePool of two, a
// CrossplaneMachinePool the plane's auto scaling group runs. CAPI reports
// it Available through the contracts alone; the pool scales both ways with
// its MachinePool; the bridge writes CAPI's kubeconfig Secret from the Secret
// the composition names, rotates it when that changes, refuses one that
// holds no kubeconfig with a condition on the Cluster, follows a swapped
// Composition without a CAPI object changing, and everything goes with the
// Cluster.
func TestManagedControlPlane(t *testing.T) {
	ctx := t.Context()
	e := availableExample(t, "managed", 3*time.Minute)
	ns := e.Namespace()

	cp := &unstructured.Unstructured{}
	cp.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1alpha1")
	cp.SetKind(infrav1.CrossplaneControlPlaneKind)
	if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: e.Cluster}, cp); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]any{
		"status.initialization.controlPlaneInitialized": true,
		"status.externalManagedControlPlane":            true,
		"status.version":                                "v1.36.5",
	} {
		if got, _, _ := unstructured.NestedFieldNoCopy(cp.Object, strings.Split(path, ".")...); got != want {
			t.Errorf("CrossplaneControlPlane %s: %s is %v, want %v", cp.GetName(), path, got, want)
		}
	}
	cluster := &clusterv1.Cluster{}
	if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: e.Cluster}, cluster); err != nil {
		t.Fatal(err)
	}
	host, _, _ := unstructured.NestedString(cp.Object, "spec", "controlPlaneEndpoint", "host")
	if cluster.Spec.ControlPlaneEndpoint.Host == "" || cluster.Spec.ControlPlaneEndpoint.Host != host {
		t.Errorf("the Cluster's endpoint %v is not the control plane's (%s)", cluster.Spec.ControlPlaneEndpoint, host)
	}
	if c := conditions.Get(cluster, clusterv1.ClusterControlPlaneAvailableCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("the Cluster's ControlPlaneAvailable: %+v", c)
	}

	// The MachinePool's empty data secret name: its XR composed with no
	// bootstrap reference.
	pool := &unstructured.Unstructured{}
	pool.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1alpha1")
	pool.SetKind(infrav1.CrossplaneMachinePoolKind)
	if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: "managed-pool"}, pool); err != nil {
		t.Fatal(err)
	}
	if b, found, _ := unstructured.NestedFieldNoCopy(pool.Object, "spec", "bootstrap"); found {
		t.Errorf("CrossplaneMachinePool managed-pool: spec.bootstrap %v, want none for a MachinePool whose data secret name is empty", b)
	}

	// Each scale of the pool is planned first, as the planner, and the
	// plan held against what happened.
	bindPlanner(t, ns)
	var plans planChecks
	scalePool(t, ns, "managed-pool", "managed-pool", func(replicas int32) func() {
		mp := &clusterv1.MachinePool{}
		if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: "managed-pool"}, mp); err != nil {
			t.Fatal(err)
		}
		target := &unstructured.Unstructured{}
		target.SetAPIVersion(clusterv1.GroupVersion.String())
		target.SetKind("MachinePool")
		target.SetNamespace(ns)
		target.SetName(mp.Name)
		return plans.change(t, fmt.Sprintf("MachinePool: scaled to %d", replicas), mp.Spec.ClusterName,
			[]xrRef{{infrav1.CrossplaneMachinePoolKind, "managed-pool"}}, target, map[string]any{"spec": map[string]any{"replicas": int64(replicas)}})
	})
	plans.report(t)

	// CAPI's kubeconfig Secret: the composition's, CAPI's type and label,
	// controlled by the XR, and it reaches the workload cluster.
	source := &corev1.Secret{}
	if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: "workload-kubeconfig"}, source); err != nil {
		t.Fatal(err)
	}
	kubeconfig := func() (*corev1.Secret, error) {
		s := &corev1.Secret{}
		return s, mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: e.Cluster + "-kubeconfig"}, s)
	}
	pub, err := kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pub.Data["value"], source.Data["kubeconfig"]) || pub.Type != clusterv1.ClusterSecretType ||
		pub.Labels[clusterv1.ClusterNameLabel] != e.Cluster || !metav1.IsControlledBy(pub, cp) {
		t.Errorf("Secret %s: want the composition's kubeconfig, CAPI's type and cluster-name label, controlled by the XR; got type %s, labels %v, owners %v",
			pub.Name, pub.Type, pub.Labels, pub.OwnerReferences)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(pub.Data["value"])
	if err != nil {
		t.Fatal(err)
	}
	workload, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := workload.List(ctx, &corev1.NodeList{}); err != nil {
		t.Errorf("the published kubeconfig does not reach the workload cluster: %v", err)
	}

	// A Secret that holds no kubeconfig is refused, named on the Cluster;
	// CAPI keeps the last good one.
	setSource := func(raw []byte) {
		t.Helper()
		s := source.DeepCopy()
		if err := mgmt().Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
			t.Fatal(err)
		}
		s.Data["kubeconfig"] = raw
		if err := mgmt().Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	setSource([]byte("apiVersion: v1\nkind: Config\n"))
	eventually(t, "the Cluster says the control plane's kubeconfig is not usable", 2*time.Minute, func() error {
		c := &clusterv1.Cluster{}
		if err := mgmt().Get(ctx, client.ObjectKeyFromObject(cluster), c); err != nil {
			return err
		}
		v := conditions.Get(c, infrav1.CrossplaneControlPlaneReadyCondition)
		if v == nil || v.Reason != infrav1.InvalidKubeconfigReason {
			return fmt.Errorf("%s: %+v", infrav1.CrossplaneControlPlaneReadyCondition, v)
		}
		return nil
	})
	if s, err := kubeconfig(); err != nil || !bytes.Equal(s.Data["value"], source.Data["kubeconfig"]) {
		t.Errorf("Secret %s changed to what holds no kubeconfig (%v)", pub.Name, err)
	}

	// A rotated kubeconfig (here: the same credentials under new names)
	// replaces the published one, and the verdict clears.
	renamed := func(context string) []byte {
		t.Helper()
		kc, err := clientcmd.Load(source.Data["kubeconfig"])
		if err != nil {
			t.Fatal(err)
		}
		kc.Contexts[context] = kc.Contexts[kc.CurrentContext]
		delete(kc.Contexts, kc.CurrentContext)
		kc.CurrentContext = context
		raw, err := clientcmd.Write(*kc)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	published := func(what string, want []byte) {
		t.Helper()
		eventually(t, what, 2*time.Minute, func() error {
			s, err := kubeconfig()
			if err != nil {
				return err
			}
			if !bytes.Equal(s.Data["value"], want) {
				return fmt.Errorf("Secret %s holds another kubeconfig", s.Name)
			}
			return nil
		})
	}
	rotated := renamed("rotated")
	setSource(rotated)
	published("the rotated kubeconfig is published", rotated)
	waitForExampleAvailable(t, e, e.Machines, time.Minute)

	// A ProviderConfig that uses the published Secret as its credentials
	// locks it: the bridge does not carry a change of the source into what
	// was judged as credentials, and says so on the Cluster; once nothing
	// relies on it, it publishes again.
	usesCopy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "ProviderConfig",
		"metadata": map[string]any{"namespace": ns, "name": "uses-the-published-kubeconfig"},
		"spec": map[string]any{"credentials": map[string]any{"source": "Secret",
			"secretRef": map[string]any{"namespace": ns, "name": e.Cluster + "-kubeconfig", "key": "value"}}},
	}}
	if err := mgmt().Create(ctx, usesCopy); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the record locks the published Secret", time.Minute, func() error {
		rec := &infrav1.NamespaceCredentials{}
		if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: infrav1.NamespaceCredentialsName}, rec); err != nil {
			return err
		}
		for _, l := range rec.Spec.Locked {
			if l.Kind == "Secret" && l.Name == e.Cluster+"-kubeconfig" {
				return nil
			}
		}
		return fmt.Errorf("locked: %v", rec.Spec.Locked)
	})
	held := renamed("held")
	setSource(held)
	eventually(t, "the Cluster says the published kubeconfig is locked", 2*time.Minute, func() error {
		c := &clusterv1.Cluster{}
		if err := mgmt().Get(ctx, client.ObjectKeyFromObject(cluster), c); err != nil {
			return err
		}
		if v := conditions.Get(c, infrav1.CrossplaneControlPlaneReadyCondition); v == nil || v.Reason != infrav1.KubeconfigLockedReason {
			return fmt.Errorf("%s: %+v", infrav1.CrossplaneControlPlaneReadyCondition, v)
		}
		return nil
	})
	if s, err := kubeconfig(); err != nil || !bytes.Equal(s.Data["value"], rotated) {
		t.Errorf("the locked Secret %s-kubeconfig was rewritten (%v)", e.Cluster, err)
	}
	if err := mgmt().Delete(ctx, usesCopy); err != nil {
		t.Fatal(err)
	}
	published("once no ProviderConfig relies on it, the kubeconfig is published again", held)
	waitForExampleAvailable(t, e, e.Machines, time.Minute)

	// Another Composition of the service, swapped in on the XR alone: its
	// kubeconfig Secret is published at once, and no CAPI object changes.
	alt, err := compositions.Read("local/controlplane.yaml")
	if err != nil {
		t.Fatal(err)
	}
	alt.SetName("managed-alternative")
	alt.SetLabels(map[string]string{compositions.LabelBackend: "alternative"})
	steps, _, _ := unstructured.NestedSlice(alt.Object, "spec", "pipeline")
	resources, _, _ := unstructured.NestedSlice(steps[0].(map[string]any), "input", "resources")
	for _, r := range resources {
		if r.(map[string]any)["name"] == "service" {
			_ = unstructured.SetNestedField(r.(map[string]any), "managed-admin", "base", "metadata", "annotations", "capxp.dev/kubeconfig-secret")
		}
	}
	_ = unstructured.SetNestedSlice(steps[0].(map[string]any), resources, "input", "resources")
	_ = unstructured.SetNestedSlice(alt.Object, steps, "spec", "pipeline")
	if err := mgmt().Create(ctx, alt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgmt().Delete(ctx, alt) })
	swapped := renamed("swapped")
	admin := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "managed-admin"}, Data: map[string][]byte{"kubeconfig": swapped}}
	if err := mgmt().Create(ctx, admin); err != nil {
		t.Fatal(err)
	}
	patch(t, cp, map[string]any{"spec": map[string]any{"crossplane": map[string]any{"compositionRef": map[string]any{"name": alt.GetName()}}}})
	published("the swapped Composition's kubeconfig is published", swapped)
	after := &clusterv1.Cluster{}
	if err := mgmt().Get(ctx, client.ObjectKeyFromObject(cluster), after); err != nil {
		t.Fatal(err)
	}
	if after.Generation != cluster.Generation {
		t.Errorf("the Cluster's spec changed with the Composition (generation %d to %d)", cluster.Generation, after.Generation)
	}
	waitForExampleAvailable(t, e, e.Machines, time.Minute)

	deleteExampleCluster(t, e, 2*time.Minute, func() error { return managedLeft(t, e, "managed-pool") })
}

// managedLeft says what is left of a managed example cluster whose pool's
// XR is pool: its XRs, their composed Objects, its kubeconfig Secret, the
// plane's auto scaling group and its instances.
func managedLeft(t *testing.T, e plane.Example, pool string) error {
	t.Helper()
	ctx, ns := t.Context(), e.Namespace()
	for _, kind := range []string{infrav1.CrossplaneControlPlaneKind, infrav1.CrossplaneClusterKind, infrav1.CrossplaneMachineKind, infrav1.CrossplaneMachinePoolKind} {
		if n := len(listOf(t, ns, "infrastructure.cluster.x-k8s.io/v1alpha1", kind)); n > 0 {
			return fmt.Errorf("%d %ss left", n, kind)
		}
	}
	if n := len(listOf(t, ns, "kubernetes.m.crossplane.io/v1alpha1", "Object")); n > 0 {
		return fmt.Errorf("%d Objects left", n)
	}
	if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: e.Cluster + "-kubeconfig"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("Secret %s-kubeconfig left (%v)", e.Cluster, err)
	}
	// The auto scaling group is gone with its instances.
	if err := noneLeft(ctx, p.Workload.Client, &corev1.NodeList{}, client.MatchingLabels{"capxp.dev/local-machine-pool": ns + "." + pool}); err != nil {
		return err
	}
	return noneLeft(ctx, p.Workload.Client, &corev1.ConfigMapList{}, client.InNamespace(compositions.LocalMachinePoolNamespace))
}

// scalePool scales MachinePool name, of two, with scale up to three and
// down to one, and waits each time until the plane runs that many Nodes for
// its CrossplaneMachinePool xr, spread over the pool's failure domains, and
// CAPI counts them ready in the MachinePool.
func scalePool(t *testing.T, ns, name, xr string, scale func(replicas int32) (happened func())) {
	t.Helper()
	ctx := t.Context()
	key := client.ObjectKey{Namespace: ns, Name: name}
	nodes := func() ([]corev1.Node, error) {
		l := &corev1.NodeList{}
		err := p.Workload.Client.List(ctx, l, client.MatchingLabels{"capxp.dev/local-machine-pool": ns + "." + xr})
		return l.Items, err
	}
	settled := func(replicas int32) {
		t.Helper()
		eventually(t, fmt.Sprintf("MachinePool %s runs %d ready machines", name, replicas), 2*time.Minute, func() error {
			mp := &clusterv1.MachinePool{}
			if err := mgmt().Get(ctx, key, mp); err != nil {
				return err
			}
			running, err := nodes()
			if err != nil {
				return err
			}
			if len(running) != int(replicas) || len(mp.Spec.ProviderIDList) != int(replicas) || ptr.Deref(mp.Status.ReadyReplicas, 0) != replicas {
				return fmt.Errorf("%d Nodes, %d provider IDs, %d ready", len(running), len(mp.Spec.ProviderIDList), ptr.Deref(mp.Status.ReadyReplicas, 0))
			}
			zones := map[string]int{}
			for i := range running {
				n := &running[i]
				if !slices.Contains(mp.Spec.ProviderIDList, n.Spec.ProviderID) {
					return fmt.Errorf("Node %s (%s) is not in the MachinePool's providerIDList %v", n.Name, n.Spec.ProviderID, mp.Spec.ProviderIDList)
				}
				zones[n.Labels["topology.kubernetes.io/zone"]]++
			}
			if replicas >= 2 && (zones["zone-a"] == 0 || zones["zone-b"] == 0) {
				return fmt.Errorf("Nodes not spread over zone-a and zone-b: %v", zones)
			}
			return nil
		})
	}
	settled(2)
	for _, replicas := range []int32{3, 1} {
		happened := scale(replicas)
		settled(replicas)
		happened()
	}
}

// TestManagedClusterClass runs examples/managed-topology: a Cluster of the
// release's ClusterClass crossplane-managed, which CAPI's topology
// controller turns into a CrossplaneCluster, a CrossplaneControlPlane (a
// managed control plane, no Machines), a MachineDeployment of
// CrossplaneMachines and a MachinePool of a CrossplaneMachinePool, the
// workers bootstrapped by kubeadm's bootstrap provider. Through
// spec.topology alone it scales the pool, and changes the workers' size: the
// MachineDeployment rolls onto a new template, the pool's XR takes the new
// size in place. Everything goes with the Cluster.
func TestManagedClusterClass(t *testing.T) {
	ctx := t.Context()
	e := availableExample(t, "managed-topology", 3*time.Minute)
	ns := e.Namespace()

	cluster := &clusterv1.Cluster{}
	if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: e.Cluster}, cluster); err != nil {
		t.Fatal(err)
	}
	if cluster.Spec.ControlPlaneRef.Kind != infrav1.CrossplaneControlPlaneKind {
		t.Fatalf("the Cluster's control plane is a %s, want the class's %s", cluster.Spec.ControlPlaneRef.Kind, infrav1.CrossplaneControlPlaneKind)
	}
	// The class's control plane, patched with the Cluster's variables and
	// version, initialized at the version the service serves.
	cp := &unstructured.Unstructured{}
	cp.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1alpha1")
	cp.SetKind(infrav1.CrossplaneControlPlaneKind)
	if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.Spec.ControlPlaneRef.Name}, cp); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]any{
		"spec.providerConfigRef.name":                   "workload",
		"spec.version":                                  "v1.36.5",
		"status.initialization.controlPlaneInitialized": true,
		"status.version":                                "v1.36.5",
	} {
		if got, _, _ := unstructured.NestedFieldNoCopy(cp.Object, strings.Split(path, ".")...); got != want {
			t.Errorf("CrossplaneControlPlane %s: %s is %v, want %v", cp.GetName(), path, got, want)
		}
	}
	if _, owned := cp.GetLabels()[clusterv1.ClusterTopologyOwnedLabel]; !owned {
		t.Errorf("CrossplaneControlPlane %s: labels %v, not the topology's", cp.GetName(), cp.GetLabels())
	}
	if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: e.Cluster + "-kubeconfig"}, &corev1.Secret{}); err != nil {
		t.Errorf("the cluster's kubeconfig Secret: %v", err)
	}

	pools := &clusterv1.MachinePoolList{}
	if err := mgmt().List(ctx, pools, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(pools.Items) != 1 {
		t.Fatalf("%d MachinePools, want the topology's one", len(pools.Items))
	}
	mp := pools.Items[0]
	xr := mp.Spec.Template.Spec.InfrastructureRef.Name
	if mp.Spec.Template.Spec.Bootstrap.ConfigRef.Kind != "KubeadmConfig" {
		t.Errorf("MachinePool %s: bootstrap %v, want the class's KubeadmConfig", mp.Name, mp.Spec.Template.Spec.Bootstrap.ConfigRef)
	}
	// Each change of the topology is planned first, as the planner, and the
	// plan held against what happened.
	bindPlanner(t, ns)
	var plans planChecks
	xrs := []xrRef{{infrav1.CrossplaneClusterKind, cluster.Spec.InfrastructureRef.Name}, {infrav1.CrossplaneMachinePoolKind, xr}}
	scalePool(t, ns, mp.Name, xr, func(replicas int32) func() {
		return plans.change(t, fmt.Sprintf("ClusterClass: the pool scaled to %d", replicas), cluster.Name, xrs, toUnstructured(t, cluster),
			map[string]any{"spec": map[string]any{"topology": map[string]any{"workers": map[string]any{
				"machinePools": []any{map[string]any{"class": "pool", "name": "mp-0", "replicas": int64(replicas)}},
			}}}})
	})

	// The workers' size: a new template for the MachineDeployment, whose
	// machines are replaced; the pool's XR takes it in place, as an auto
	// scaling group rolls its instances onto a new launch template.
	happened := plans.change(t, "ClusterClass: the workers' size, a MachineDeployment and a pool", cluster.Name, xrs, toUnstructured(t, cluster),
		map[string]any{"spec": map[string]any{"topology": map[string]any{"variables": variablesWith(t, cluster, map[string]any{"workerMachineSize": "large"})}}})
	eventually(t, "the pool's XR and every machine are of the new size", 3*time.Minute, func() error {
		pool := &unstructured.Unstructured{}
		pool.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1alpha1")
		pool.SetKind(infrav1.CrossplaneMachinePoolKind)
		if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: xr}, pool); err != nil {
			return err
		}
		if size, _, _ := unstructured.NestedString(pool.Object, "spec", "parameters", "size"); size != "large" {
			return fmt.Errorf("CrossplaneMachinePool %s: size %q", xr, size)
		}
		var small []string
		machines := listOf(t, ns, "infrastructure.cluster.x-k8s.io/v1alpha1", infrav1.CrossplaneMachineKind)
		for _, m := range machines {
			if size, _, _ := unstructured.NestedString(m.Object, "spec", "parameters", "size"); size != "large" {
				small = append(small, m.GetName())
			}
		}
		if len(small) > 0 || len(machines) != e.Machines {
			return fmt.Errorf("%d machines, of the old size: %v", len(machines), small)
		}
		return nil
	})
	waitForExampleAvailable(t, e, e.Machines, 2*time.Minute)
	happened()
	plans.report(t)

	deleteExampleCluster(t, e, 2*time.Minute, func() error { return managedLeft(t, e, xr) })
}
