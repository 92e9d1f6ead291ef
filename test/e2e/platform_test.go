package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
		if err := p.Workload.Client.Get(ctx, client.ObjectKey{Name: vm.GetName()}, node); err != nil {
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
