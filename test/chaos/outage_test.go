package chaos

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
)

var crossplaneOutage = flag.Duration("crossplane-outage", 2*time.Minute, "how long Crossplane core is stopped while a cluster provisions")

// TestCrossplaneOutage stops Crossplane core while a cluster provisions, as
// an upgrade or an eviction would, and keeps it stopped for
// -crossplane-outage (2 minutes). Meanwhile CAPI's objects say why they wait
// and their conditions do not flap; once Crossplane is back the cluster
// converges, with nothing orphaned or duplicated.
func TestCrossplaneOutage(t *testing.T) {
	ctx := t.Context()
	fleet := []string{"outage-1"}
	if err := applyFleet(ctx, fleet); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cluster's infrastructure is provisioned", time.Minute, func() error {
		return infrastructureProvisioned(ctx, fleet[0])
	})
	p.StopCrossplaneCore()
	stopped := time.Now()
	t.Logf("stopped Crossplane core while the machines provision")

	// Watch every Machine's InfrastructureReady while Crossplane is down:
	// each may change (to what it waits for), never back.
	h := history{}
	for time.Since(stopped) < *crossplaneOutage {
		if err := h.seeMachines(ctx, plane.ExampleNamespaceOf(fleet[0])); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
	h.flapped(t, "while Crossplane was down", true)
	if err := p.StartCrossplaneCore(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("started Crossplane core again after %s", time.Since(stopped).Round(time.Second))
	eventually(t, "the cluster converges, nothing orphaned or duplicated", 3*time.Minute, func() error {
		return converged(ctx, fleet, 0)
	})
	responsive(ctx, t)
	deleteAll(ctx, t, fleet)
}

// infrastructureProvisioned says whether the cluster's infrastructure (not
// yet its machines') is provisioned.
func infrastructureProvisioned(ctx context.Context, name string) error {
	c := &clusterv1.Cluster{}
	if err := mgmt().Get(ctx, client.ObjectKey{Namespace: plane.ExampleNamespaceOf(name), Name: name}, c); err != nil {
		return err
	}
	if c.Status.Initialization.InfrastructureProvisioned == nil || !*c.Status.Initialization.InfrastructureProvisioned {
		return fmt.Errorf("cluster %s's infrastructure is not provisioned yet", name)
	}
	return nil
}
