package chaos

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
)

var (
	managementOutage = flag.Duration("management-outage", 30*time.Second, "how long the management kube-apiserver is down while a cluster provisions")
	workloadOutage   = flag.Duration("workload-outage", 90*time.Second, "how long the workload cluster's API server is unreachable while a cluster provisions")
)

// TestManagementAPIServerRestart stops the management kube-apiserver while a
// cluster's machines provision, as a crash or a control-plane upgrade would,
// and starts it again after -management-outage on the same etcd. Every
// component (the manager, Crossplane, CAPI, provider-kubernetes) keeps
// running and reconnects; nothing can be read while it is down, so the test
// compares what CAPI's objects said before with what they say after: no
// Machine's InfrastructureReady went back, and the cluster converges with
// nothing orphaned or duplicated, then deletes with nothing stuck.
func TestManagementAPIServerRestart(t *testing.T) {
	ctx := t.Context()
	fleet := []string{"restart-1"}
	ns := plane.ExampleNamespaceOf(fleet[0])
	if err := applyFleet(ctx, fleet); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cluster's infrastructure is provisioned", time.Minute, func() error {
		return infrastructureProvisioned(ctx, fleet[0])
	})
	h := history{}
	if err := h.seeMachines(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := p.Management().StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Logf("stopped the management kube-apiserver while the machines provision")
	time.Sleep(*managementOutage - time.Since(stopped))
	if err := p.Management().StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("the management kube-apiserver serves again after %s", time.Since(stopped).Round(time.Second))

	eventually(t, "the cluster converges, nothing orphaned or duplicated", 3*time.Minute, func() error {
		if err := h.seeMachines(ctx, ns); err != nil {
			return err
		}
		return converged(ctx, fleet, 0)
	})
	h.flapped(t, "across the restart", true)
	if ended := p.Crashed(); len(ended) > 0 {
		t.Errorf("processes of the plane ended across the restart: %v", ended)
	}
	responsive(ctx, t)
	deleteAll(ctx, t, fleet)
}

// TestWorkloadAPIServerOutage makes the workload cluster's API server (which
// stands in for the cloud behind the local backend, and is what CAPI probes)
// unreachable for -workload-outage, with one cluster provisioned and another
// just applied. Meanwhile CAPI's Cluster says it cannot reach the cluster,
// and no Machine's InfrastructureReady flaps: the provisioned machines stay
// provisioned, the others wait for the infrastructure they cannot compose.
// Once it is back both clusters converge with nothing orphaned or
// duplicated, and delete with nothing stuck.
func TestWorkloadAPIServerOutage(t *testing.T) {
	ctx := t.Context()
	provisioned, provisioning := "reachable-1", "unreachable-1"
	if err := applyFleet(ctx, []string{provisioned}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first cluster converges and CAPI reaches it", 3*time.Minute, func() error {
		if err := converged(ctx, []string{provisioned}, 0); err != nil {
			return err
		}
		if probe := remoteConnectionProbe(ctx, provisioned); probe == nil || probe.Status != metav1.ConditionTrue {
			return fmt.Errorf("RemoteConnectionProbe is %v", probe)
		}
		return nil
	})
	if err := p.Workload.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Logf("the workload cluster's API server is unreachable")
	if err := applyFleet(ctx, []string{provisioning}); err != nil {
		t.Fatal(err)
	}

	machines, probes := history{}, history{}
	for time.Since(stopped) < *workloadOutage {
		for _, name := range []string{provisioned, provisioning} {
			if err := machines.seeMachines(ctx, plane.ExampleNamespaceOf(name)); err != nil {
				t.Fatal(err)
			}
			probes.see("Cluster "+name+" RemoteConnectionProbe", remoteConnectionProbe(ctx, name))
		}
		time.Sleep(time.Second)
	}
	if err := p.Workload.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("the workload cluster's API server is reachable again after %s", time.Since(stopped).Round(time.Second))
	machines.flapped(t, "while the workload cluster was unreachable", true)
	// The probe goes from True to False: that is how CAPI says why.
	probes.flapped(t, "while the workload cluster was unreachable", false)
	for _, name := range []string{provisioned, provisioning} {
		if s := probes["Cluster "+name+" RemoteConnectionProbe"]; len(s) == 0 || !strings.HasPrefix(s[len(s)-1], "False ") {
			t.Errorf("Cluster %s did not say that it cannot reach the workload cluster: RemoteConnectionProbe went %q", name, s)
		}
	}

	fleet := []string{provisioned, provisioning}
	eventually(t, "both clusters converge, nothing orphaned or duplicated", 3*time.Minute, func() error {
		return converged(ctx, fleet, 0)
	})
	if ended := p.Crashed(); len(ended) > 0 {
		t.Errorf("processes of the plane ended while the workload cluster was unreachable: %v", ended)
	}
	responsive(ctx, t)
	deleteAll(ctx, t, fleet)
}

// remoteConnectionProbe is CAPI's word on whether it reaches the cluster.
func remoteConnectionProbe(ctx context.Context, name string) *metav1.Condition {
	c := &clusterv1.Cluster{}
	if err := mgmt().Get(ctx, client.ObjectKey{Namespace: plane.ExampleNamespaceOf(name), Name: name}, c); err != nil {
		return &metav1.Condition{Status: "Unknown", Reason: "CannotRead", Message: err.Error()}
	}
	return meta.FindStatusCondition(c.Status.Conditions, clusterv1.ClusterRemoteConnectionProbeCondition)
}
