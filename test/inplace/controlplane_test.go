package inplace

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// The control plane of examples/local.
const (
	cpNamespace = "capxp-demo"
	cpCluster   = "demo"
	kcp         = "demo-control-plane"
)

// A KubeadmControlPlane, run as CAPI ships it, asks CAPXP's
// CanUpdateMachine about each control-plane Machine: a template of another
// size, which the local Composition declares in place, then a file of its
// kubeadm config, which the Composition declares its hosts apply. Neither
// replaces the Machine.
func TestControlPlaneInPlace(t *testing.T) {
	ctx := t.Context()
	c := p.Management().Client
	available(t, "local")

	// KubeadmControlPlane updates in place only a Machine it would
	// otherwise delete: with a surge, it first creates a new one, and a
	// control plane of one then has nothing left to update. CAPI's
	// webhook takes a surge of 0 only with three replicas or more.
	patchKCP(t, c, `{"spec":{"replicas":3,"rollout":{"strategy":{"rollingUpdate":{"maxSurge":0}}}}}`)
	waitFor(t, "three control-plane Machines", 4*time.Minute, func() error {
		return controlPlaneScaled(ctx, c, 3)
	})
	running := controlPlaneMachines(t, c)

	large := &infrav1.CrossplaneMachineTemplate{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cpNamespace, Name: kcp}, large); err != nil {
		t.Fatal(err)
	}
	large.ObjectMeta = metav1.ObjectMeta{Namespace: cpNamespace, Name: kcp + "-large"}
	large.Spec.Template.Spec.Parameters.Size = "large"
	if err := c.Create(ctx, large); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	patchKCP(t, c, fmt.Sprintf(`{"spec":{"machineTemplate":{"spec":{"infrastructureRef":{"name":%q}}}}}`, large.Name))
	waitFor(t, "every control-plane Machine of the new size, none replaced", 4*time.Minute, func() error {
		return controlPlaneIs(ctx, c, running, "large", "")
	})
	t.Logf("in place: %d control-plane Machines took the new size in %s, none replaced", len(running), time.Since(start).Round(time.Second))

	start = time.Now()
	patchKCP(t, c, `{"spec":{"kubeadmConfigSpec":{"files":[{"path":"/etc/capxp/motd","content":"updated in place"}]}}}`)
	waitFor(t, "every control-plane Machine's kubeadm config with the file, none replaced", 4*time.Minute, func() error {
		return controlPlaneIs(ctx, c, running, "large", "updated in place")
	})
	t.Logf("in place: %d control-plane Machines took the file in %s, none replaced", len(running), time.Since(start).Round(time.Second))
}

// patchKCP merge-patches the KubeadmControlPlane.
func patchKCP(t *testing.T, c client.Client, patch string) {
	t.Helper()
	k := &controlplanev1.KubeadmControlPlane{}
	k.Namespace, k.Name = cpNamespace, kcp
	if err := c.Patch(t.Context(), k, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// controlPlaneMachines are the names of the control plane's Machines,
// sorted.
func controlPlaneMachines(t *testing.T, c client.Client) []string {
	t.Helper()
	names, err := listControlPlane(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func listControlPlane(ctx context.Context, c client.Client) ([]string, error) {
	list := &clusterv1.MachineList{}
	if err := c.List(ctx, list, client.InNamespace(cpNamespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cpCluster, clusterv1.MachineControlPlaneLabel: ""}); err != nil {
		return nil, err
	}
	var names []string
	for i := range list.Items {
		names = append(names, list.Items[i].Name)
	}
	slices.Sort(names)
	return names, nil
}

// controlPlaneScaled says what keeps the control plane from having n
// Machines, all up to date and available.
func controlPlaneScaled(ctx context.Context, c client.Client, n int32) error {
	names, err := listControlPlane(ctx, c)
	if err != nil {
		return err
	}
	k := &controlplanev1.KubeadmControlPlane{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cpNamespace, Name: kcp}, k); err != nil {
		return err
	}
	if len(names) != int(n) || ptrValue(k.Status.UpToDateReplicas) != n || ptrValue(k.Status.AvailableReplicas) != n {
		return fmt.Errorf("KubeadmControlPlane %s: %d Machines, %d up to date, %d available, want %d", kcp, len(names), ptrValue(k.Status.UpToDateReplicas), ptrValue(k.Status.AvailableReplicas), n)
	}
	return nil
}

// controlPlaneIs says what keeps the control plane from being done: the
// same Machines as running, the KubeadmControlPlane rolled out, none
// updating, each XR of the size and its Node labelled with it, and each
// Machine's KubeadmConfig holding the file of the given content (none
// when empty).
func controlPlaneIs(ctx context.Context, c client.Client, running []string, size, file string) error {
	now, err := listControlPlane(ctx, c)
	if err != nil {
		return err
	}
	if !slices.Equal(now, running) {
		return fmt.Errorf("the control plane's Machines are %v, were %v: a Machine was replaced", now, running)
	}
	k := &controlplanev1.KubeadmControlPlane{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cpNamespace, Name: kcp}, k); err != nil {
		return err
	}
	want := ptrValue(k.Spec.Replicas)
	if ptrValue(k.Status.UpToDateReplicas) != want || ptrValue(k.Status.AvailableReplicas) != want {
		return fmt.Errorf("KubeadmControlPlane %s: %d up to date, %d available, want %d", kcp, ptrValue(k.Status.UpToDateReplicas), ptrValue(k.Status.AvailableReplicas), want)
	}
	for _, name := range now {
		m, err := machineIs(ctx, c, cpNamespace, name, size, "")
		if err != nil {
			return err
		}
		if file == "" {
			continue
		}
		config := &bootstrapv1.KubeadmConfig{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: cpNamespace, Name: m.Spec.Bootstrap.ConfigRef.Name}, config); err != nil {
			return err
		}
		if !slices.ContainsFunc(config.Spec.Files, func(f bootstrapv1.File) bool { return f.Content == file }) {
			return fmt.Errorf("KubeadmConfig %s has no file of content %q", config.Name, file)
		}
	}
	return nil
}
