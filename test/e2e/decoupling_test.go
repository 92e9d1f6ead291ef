package e2e

// The decoupling examples (docs/decoupling.md): a platform team's own
// machine kind, and CAPXP machines under an InfraCluster another system
// manages.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// TestPlatformKind runs examples/platform: a MachineDeployment of a platform
// team's own machine kind (another API group, its own parameters and
// Composition), stamped out from the template CRD `capxp xrd adopt`
// generates. CAPI clones the template into XRs the bridge adapts; the
// deployment scales; deleting the cluster leaves nothing.
func TestPlatformKind(t *testing.T) {
	ctx := t.Context()
	e := provisionedExample(t, "platform", 90*time.Second)
	ns := e.Namespace()

	vms := func() []unstructured.Unstructured {
		return listOf(t, ns, "compute.platform.example.org/v1alpha1", "VirtualMachine")
	}
	// Each VirtualMachine is the template's clone: its labels, its
	// parameters, the Composition the XRD defaults to; its Node carries the
	// flavor and the providerID CAPI matched.
	got := vms()
	if len(got) != e.Machines {
		t.Fatalf("%d VirtualMachines, want %d", len(got), e.Machines)
	}
	for _, vm := range got {
		flavor, _, _ := unstructured.NestedString(vm.Object, "spec", "parameters", "flavor")
		comp, _, _ := unstructured.NestedString(vm.Object, "spec", "crossplane", "compositionRef", "name")
		providerID, _, _ := unstructured.NestedString(vm.Object, "spec", "providerID")
		if vm.GetLabels()["platform.example.org/pool"] != "workers" || vm.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation] != "vms-workers" ||
			flavor != "large" || comp != "virtualmachine-local" {
			t.Errorf("VirtualMachine %s: labels %v, annotations %v, flavor %q, composition %q: not the template's clone", vm.GetName(), vm.GetLabels(), vm.GetAnnotations(), flavor, comp)
		}
		node := &corev1.Node{}
		if err := p.Workload.Client.Get(ctx, client.ObjectKey{Name: vm.GetName() + "." + vm.GetNamespace()}, node); err != nil {
			t.Errorf("VirtualMachine %s has no Node: %v", vm.GetName(), err)
			continue
		}
		if node.Labels["platform.example.org/flavor"] != "large" || node.Spec.ProviderID != providerID || providerID == "" {
			t.Errorf("Node %s: flavor %q, providerID %q; the VirtualMachine's providerID %q", node.Name, node.Labels["platform.example.org/flavor"], node.Spec.ProviderID, providerID)
		}
	}

	// Scaling the deployment clones one more.
	md := &unstructured.Unstructured{}
	md.SetAPIVersion("cluster.x-k8s.io/v1beta2")
	md.SetKind("MachineDeployment")
	md.SetNamespace(ns)
	md.SetName("vms-workers")
	patch(t, md, map[string]any{"spec": map[string]any{"replicas": e.Machines + 1}})
	waitForMachines(t, e, e.Machines+1, 60*time.Second)

	// Deleting the cluster deletes every VirtualMachine and its Node.
	deleteExampleCluster(t, e, 90*time.Second, func() error {
		if n := len(vms()); n != 0 {
			return fmt.Errorf("%d VirtualMachines remain", n)
		}
		return noneLeft(ctx, p.Workload.Client, &corev1.NodeList{}, client.HasLabels{"platform.example.org/vm"})
	})
}

// TestExternalInfraCluster runs examples/external: CAPXP machines under an
// InfraCluster of another kind, which another system manages
// (cluster.x-k8s.io/managed-by) and which reports no network and names no
// credentials. The machines take both from their template, and each says
// where every field came from; the bridge leaves the InfraCluster alone.
func TestExternalInfraCluster(t *testing.T) {
	ctx := t.Context()
	e := provisionedExample(t, "external", 90*time.Second)
	ns := e.Namespace()

	xrs := &infrav1.CrossplaneMachineList{}
	if err := mgmt().List(ctx, xrs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(xrs.Items) != e.Machines {
		t.Fatalf("%d CrossplaneMachines, want %d", len(xrs.Items), e.Machines)
	}
	wantNetwork := infrav1.MachineNetwork{Region: "dc1", SubnetID: "vlan-120", SecurityGroupIDs: []string{"fw-nodes"}}
	for _, xr := range xrs.Items {
		if diff := cmp.Diff(wantNetwork, xr.Spec.Network); diff != "" {
			t.Errorf("CrossplaneMachine %s: network is not its template's: -want, +got:\n%s", xr.Name, diff)
		}
		from := strings.Split(xr.Annotations[infrav1.InjectedFromAnnotation], "\n")
		for _, want := range []string{
			"spec.network.region: the machine's own spec",
			"spec.network.securityGroupIDs: the machine's own spec",
			"spec.network.subnetID: the machine's own spec",
			"spec.providerConfigRef: the machine's own spec",
		} {
			if !slices.Contains(from, want) {
				t.Errorf("CrossplaneMachine %s does not say %q: %q", xr.Name, want, from)
			}
		}
	}
	// The bridge leaves what another system manages alone.
	legacy := &unstructured.Unstructured{}
	legacy.SetAPIVersion("infra.legacy.example.org/v1alpha1")
	legacy.SetKind("LegacyCluster")
	if err := mgmt().Get(ctx, client.ObjectKey{Namespace: ns, Name: e.Cluster}, legacy); err != nil {
		t.Fatal(err)
	}
	for _, f := range legacy.GetFinalizers() {
		if strings.HasPrefix(f, "capxp.dev/") {
			t.Errorf("the bridge put its finalizer %s on the externally managed LegacyCluster", f)
		}
	}

	// Deleting the cluster deletes the machines; CAPI deletes the
	// InfraCluster object as it does any, and nothing is left.
	deleteExampleCluster(t, e, 90*time.Second, func() error {
		if err := noneLeft(ctx, mgmt(), &infrav1.CrossplaneMachineList{}, client.InNamespace(ns)); err != nil {
			return err
		}
		if err := mgmt().Get(ctx, client.ObjectKeyFromObject(legacy), legacy.DeepCopy()); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the LegacyCluster still exists (%v)", err)
		}
		return nil
	})
}
