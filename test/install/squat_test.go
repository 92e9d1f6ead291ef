package install

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
)

// squatAnotherNamespacesMachine attacks, as the tenant (tc) with its own
// usable config, another namespace's machine on the shared workload
// cluster: a machine XR named as the other's, and one that presets the
// other's provider ID. The first gets a Node of its own, the second is
// never composed; the other's Node is not written to.
func squatAnotherNamespacesMachine(ctx context.Context, t *testing.T, p *plane.Plane, tc client.Client, record func(name, outcome string)) {
	t.Helper()
	admin := p.Management().Client
	const ns, name = hostileNamespace, "squat"

	victim := machineWithNode(ctx, t, admin, ns)
	node := victim.Status.NodeRef.Name
	// Which managed resources wrote the Node (provider-kubernetes names
	// its field manager after the Object), and where it says it is.
	managers := func(n *corev1.Node) []string {
		var out []string
		for _, f := range n.ManagedFields {
			if strings.HasPrefix(f.Manager, "provider-kubernetes") {
				out = append(out, f.Manager)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	before := &corev1.Node{}
	if err := p.Workload.Client.Get(ctx, client.ObjectKey{Name: node}, before); err != nil {
		t.Fatal(err)
	}

	// The tenant's cluster, on its own config of the same workload cluster.
	createAs(ctx, t, tc, xrOf("CrossplaneCluster", ns, name, map[string]any{
		"providerConfigRef": map[string]any{"apiGroup": k8sGroup, "kind": "ProviderConfig", "name": ownConfig},
		"crossplane":        map[string]any{"compositionSelector": map[string]any{"matchLabels": map[string]any{"capxp.dev/backend": "local"}}},
	}))
	createAs(ctx, t, tc, &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "CrossplaneCluster", Name: name}},
	})
	createAs(ctx, t, tc, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-boot"}, Data: map[string][]byte{"value": []byte("#!/bin/sh\n")}})
	machine := func(xrName string, spec map[string]any) {
		t.Helper()
		spec["parameters"] = map[string]any{"size": "small"}
		spec["crossplane"] = map[string]any{"compositionSelector": map[string]any{"matchLabels": map[string]any{"capxp.dev/backend": "local"}}}
		createAs(ctx, t, tc, xrOf("CrossplaneMachine", ns, xrName, spec))
		createAs(ctx, t, tc, &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: xrName, Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Spec: clusterv1.MachineSpec{
				ClusterName: name,
				Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-boot")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: infrav1.GroupVersion.Group, Kind: "CrossplaneMachine", Name: xrName},
			},
		})
	}
	// Named as the other namespace's machine.
	machine(victim.Spec.InfrastructureRef.Name, map[string]any{})
	// Its provider ID preset to the other's.
	machine(name+"-claimer", map[string]any{"providerID": victim.Spec.ProviderID})

	eventually(t, "the machine presetting another's provider ID is refused, InvalidProviderID", 2*time.Minute, func() error {
		m := &clusterv1.Machine{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-claimer"}, m); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(m.Status.Conditions, infrav1.CrossplaneInfrastructureReadyCondition)
		if c == nil || c.Reason != infrav1.InvalidProviderIDReason {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	record("a machine XR presetting another namespace's provider ID", "never composed: InvalidProviderID on its Machine")

	own := victim.Spec.InfrastructureRef.Name + "." + ns
	eventually(t, "the machine named as another namespace's has a Node of its own", 3*time.Minute, func() error {
		return p.Workload.Client.Get(ctx, client.ObjectKey{Name: own}, &corev1.Node{})
	})
	after := &corev1.Node{}
	if err := p.Workload.Client.Get(ctx, client.ObjectKey{Name: node}, after); err != nil {
		t.Fatal(err)
	}
	if zone := "topology.kubernetes.io/zone"; before.Labels[zone] != after.Labels[zone] || !slices.Equal(managers(before), managers(after)) {
		t.Errorf("Node %s of Machine %s/%s was written by the tenant's machine of the same name: zone %q -> %q, managers %v -> %v",
			node, victim.Namespace, victim.Name, before.Labels[zone], after.Labels[zone], managers(before), managers(after))
	}
	record("a machine XR named as another namespace's", "its own Node ("+own+"); the other's Node not written to")

	if err := tc.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the tenant's cluster is deleted with its Node", 3*time.Minute, func() error {
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &clusterv1.Cluster{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Cluster is still there: %v", err)
		}
		if err := p.Workload.Client.Get(ctx, client.ObjectKey{Name: own}, &corev1.Node{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Node %s is still there: %v", own, err)
		}
		return nil
	})
	if err := p.Workload.Client.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{}); err != nil {
		t.Errorf("the other namespace's Node %s went with the tenant's machine of the same name: %v", node, err)
	}
}

// machineWithNode is a Machine outside the namespace, on a CrossplaneMachine,
// whose Node is registered.
func machineWithNode(ctx context.Context, t *testing.T, c client.Client, not string) *clusterv1.Machine {
	t.Helper()
	var found *clusterv1.Machine
	eventually(t, "another namespace's machine has a Node", 3*time.Minute, func() error {
		l := &clusterv1.MachineList{}
		if err := c.List(ctx, l); err != nil {
			return err
		}
		for i := range l.Items {
			m := &l.Items[i]
			if m.Namespace != not && m.Spec.InfrastructureRef.Kind == "CrossplaneMachine" && m.Status.NodeRef.IsDefined() && m.Spec.ProviderID != "" {
				found = m
				return nil
			}
		}
		return fmt.Errorf("none of %d Machines", len(l.Items))
	})
	return found
}

// xrOf is one of CAPXP's XRs, of kind, with spec.
func xrOf(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	xr := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	xr.SetAPIVersion(infrav1.GroupVersion.String())
	xr.SetKind(kind)
	xr.SetNamespace(ns)
	xr.SetName(name)
	return xr
}
