package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// TestBYOCluster runs examples/byo: a cluster on hosts that already exist.
// Nothing is composed; each Machine finds its host's Node by the providerID
// the platform team named; a Machine CAPI places away from its host is
// refused, naming the host's field; deleting the cluster deletes no host.
func TestBYOCluster(t *testing.T) {
	ctx := t.Context()
	e := applyExample(t, "byo")
	ns := e.Namespace()
	// The hosts are the platform team's: once the test is done with them,
	// it decommissions them itself, as nothing of CAPXP's may.
	hosts := map[string]string{} // Node name -> providerID
	t.Cleanup(func() {
		for name := range hosts {
			// t.Context() is done by now.
			_ = p.Workload.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	})
	nodes := &corev1.NodeList{}
	if err := p.Workload.Client.List(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if n.Spec.ProviderID != "" && n.Labels["capxp.dev/local-machine"] == "" {
			hosts[n.Name] = n.Spec.ProviderID
		}
	}
	if len(hosts) != e.Machines {
		t.Fatalf("the workload cluster has %d hosts' Nodes, want %d: %v", len(hosts), e.Machines, hosts)
	}

	waitForMachines(t, e, e.Machines, 90*time.Second)

	// What each Machine reports is its host's, and nothing was composed.
	want := map[string]struct{ providerID, failureDomain, address string }{
		"iron-server-0": {"metal://dc1/rack-a/server-0", "rack-a", "10.20.0.10"},
		"iron-server-1": {"metal://dc1/rack-b/server-1", "rack-b", "10.20.1.11"},
		"iron-server-2": {"metal://dc1/server-2", "", "10.20.2.12"},
	}
	for name, w := range want {
		m := &clusterv1.Machine{}
		if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
			t.Fatal(err)
		}
		if m.Spec.ProviderID != w.providerID || hosts[m.Status.NodeRef.Name] != w.providerID {
			t.Errorf("Machine %s: providerID %q, Node %q (its providerID %q), want %q", name, m.Spec.ProviderID, m.Status.NodeRef.Name, hosts[m.Status.NodeRef.Name], w.providerID)
		}
		if m.Status.FailureDomain != w.failureDomain {
			t.Errorf("Machine %s: failure domain %q, want the host's %q", name, m.Status.FailureDomain, w.failureDomain)
		}
		if len(m.Status.Addresses) == 0 || m.Status.Addresses[0].Address != w.address {
			t.Errorf("Machine %s: addresses %v, want the host's %s first", name, m.Status.Addresses, w.address)
		}
		xr := &infrav1.CrossplaneMachine{}
		if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, xr); err != nil {
			t.Fatal(err)
		}
		if xr.Spec.Crossplane == nil || len(xr.Spec.Crossplane.ResourceRefs) != 0 {
			t.Errorf("CrossplaneMachine %s composed %v, want nothing", name, xr.Spec.Crossplane)
		}
		if xr.Spec.Bootstrap.DataSecretRef == nil || xr.Spec.Bootstrap.DataSecretRef.Name != "iron-bootstrap" {
			t.Errorf("CrossplaneMachine %s: bootstrap data reference %v, want the Machine's", name, xr.Spec.Bootstrap.DataSecretRef)
		}
	}

	// A Machine placed in another failure domain than its host's is refused
	// by the gate, on the Machine, naming the host's field.
	misplaced(t, ns)

	// Deleting the cluster forgets the hosts: every CAPI and CAPXP object
	// goes, every host's Node stays as it was.
	cluster := &clusterv1.Cluster{}
	if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: e.Cluster}, cluster); err != nil {
		t.Fatal(err)
	}
	if err := mgmt().Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cluster is deleted", 60*time.Second, func() error {
		ms := &infrav1.CrossplaneMachineList{}
		if err := mgmt().List(ctx, ms, client.InNamespace(ns)); err != nil {
			return err
		}
		if err := mgmt().Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Cluster still exists (%v), with %d CrossplaneMachines", err, len(ms.Items))
		}
		if len(ms.Items) != 0 {
			return fmt.Errorf("%d CrossplaneMachines remain", len(ms.Items))
		}
		return nil
	})
	for name, id := range hosts {
		n := &corev1.Node{}
		if err := p.Workload.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			t.Errorf("host %s (%s) is gone from the workload cluster: %v", name, id, err)
			continue
		}
		if n.DeletionTimestamp != nil || n.Spec.ProviderID != id {
			t.Errorf("host %s changed: deleting %v, providerID %q", name, n.DeletionTimestamp, n.Spec.ProviderID)
		}
	}
}

// misplaced creates a machine for a host in rack-b whose Machine CAPI
// placed in rack-a.
func misplaced(t *testing.T, ns string) {
	ctx := t.Context()
	xr := &infrav1.CrossplaneMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "iron-misplaced", Labels: map[string]string{clusterv1.ClusterNameLabel: "iron"}},
		Spec: infrav1.CrossplaneMachineSpec{Parameters: infrav1.CrossplaneMachineParameters{
			Host: &infrav1.ExistingHost{ProviderID: "metal://dc1/rack-b/server-9", FailureDomain: "rack-b"}}},
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "iron-misplaced", Labels: map[string]string{clusterv1.ClusterNameLabel: "iron"}},
		Spec: clusterv1.MachineSpec{ClusterName: "iron", FailureDomain: "rack-a",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: new("iron-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "CrossplaneMachine", Name: xr.Name}},
	}
	for _, o := range []client.Object{xr, m} {
		if err := mgmt().Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the misplaced machine is refused", 30*time.Second, func() error {
		got := &clusterv1.Machine{}
		if err := mgmt().Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, infrav1.CrossplaneInfrastructureReadyCondition)
		if c == nil || c.Reason != infrav1.InvalidFailureDomainReason || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("Machine %s: %s is %v", m.Name, infrav1.CrossplaneInfrastructureReadyCondition, c)
		}
		if want := `spec.parameters.host.failureDomain "rack-b"`; !strings.Contains(c.Message, want) {
			return fmt.Errorf("the condition does not name %s: %s", want, c.Message)
		}
		t.Logf("Machine %s: %s=%s (%s): %s", m.Name, c.Type, c.Status, c.Reason, c.Message)
		return nil
	})
	if got := (&infrav1.CrossplaneMachine{}); mgmt().Get(ctx, client.ObjectKeyFromObject(xr), got) == nil && got.Spec.ProviderID != "" {
		t.Errorf("the misplaced machine got providerID %s", got.Spec.ProviderID)
	}
}
