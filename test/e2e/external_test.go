package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

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
