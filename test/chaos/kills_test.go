package chaos

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
)

// killsWhileProvisioning and killsWhileDeleting are how often the manager is
// killed outright while a fleet provisions, and while it is deleted.
const killsWhileProvisioning, killsWhileDeleting = 10, 10

// TestManagerKills kills the manager outright (SIGKILL, as the OOM killer
// does) at random points while a fleet of 3 clusters x 3 machines
// provisions, and again while it is deleted, restarting it after a random
// outage each time. The fleet converges with nothing orphaned or
// duplicated, and is deleted with nothing stuck. A machine XR created while
// the manager is down is paused by the API server's admission policy, not
// by the manager, so Crossplane never composes it early.
func TestManagerKills(t *testing.T) {
	ctx := t.Context()
	since := time.Now()
	r := random(t)
	fleet := []string{"kills-1", "kills-2", "kills-3"}

	// One cluster applied after each of the first kills, so that every
	// cluster provisions through several.
	killRepeatedly(ctx, t, r, killsWhileProvisioning, func(i int) {
		if i < len(fleet) {
			if err := applyFleet(ctx, fleet[i:i+1]); err != nil {
				t.Fatal(err)
			}
		}
		if i == killsWhileProvisioning/2 {
			createdWhileDown(ctx, t)
		}
	})
	eventually(t, "the fleet converges, nothing orphaned or duplicated", 3*time.Minute, func() error {
		return converged(ctx, fleet, 1)
	})
	responsive(ctx, t)

	deleteFleet(ctx, t, fleet)
	if err := mgmt().Delete(ctx, standalone()); err != nil {
		t.Fatal(err)
	}
	killRepeatedly(ctx, t, r, killsWhileDeleting, nil)
	eventually(t, "the fleet is deleted, nothing stuck or left in either API server", 3*time.Minute, func() error {
		return gone(ctx)
	})
	// Not a failure here: a write the manager made just before a kill is
	// not known to it when it restarts, and may be made again.
	if writes, twice, err := repeatedWrites(p.ManagementAuditLog(), since); err == nil {
		t.Logf("across %d kills the manager made %d writes; %d repeated the previous write of the same object", killsWhileProvisioning+killsWhileDeleting, writes, len(twice))
	}
}

// killRepeatedly kills the manager n times at random points, calling down
// (when not nil) while it is down, and restarts it after a random outage.
func killRepeatedly(ctx context.Context, t *testing.T, r *rand.Rand, n int, down func(i int)) {
	t.Helper()
	for i := range n {
		time.Sleep(between(r, 200*time.Millisecond, 1500*time.Millisecond))
		p.KillManager()
		c, _ := take(ctx)
		t.Logf("kill %d: the manager is down; %s", i+1, c)
		if down != nil {
			down(i)
		}
		time.Sleep(between(r, 0, time.Second))
		if err := p.RestartManager(ctx); err != nil {
			t.Fatalf("cannot restart the manager after kill %d: %v", i+1, err)
		}
	}
}

// standalone is a machine XR no Machine owns.
func standalone() *unstructured.Unstructured {
	xr := &unstructured.Unstructured{}
	xr.SetAPIVersion(infrav1.GroupVersion.String())
	xr.SetKind("CrossplaneMachine")
	xr.SetNamespace(plane.ExampleNamespaceOf("kills-1"))
	xr.SetName("created-while-down")
	return xr
}

// createdWhileDown creates a machine XR while the manager is down and finds
// it paused on creation.
func createdWhileDown(ctx context.Context, t *testing.T) {
	t.Helper()
	xr := standalone()
	_ = unstructured.SetNestedField(xr.Object, "small", "spec", "parameters", "size")
	_ = unstructured.SetNestedStringMap(xr.Object, map[string]string{"capxp.dev/backend": "local"}, "spec", "crossplane", "compositionSelector", "matchLabels")
	if err := mgmt().Create(ctx, xr); err != nil {
		t.Fatalf("cannot create a machine XR while the manager is down: %v", err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(xr.GroupVersionKind())
	if err := mgmt().Get(ctx, client.ObjectKeyFromObject(xr), got); err != nil {
		t.Fatal(err)
	}
	if v := got.GetAnnotations()[infrav1.CrossplanePausedAnnotation]; v != "true" {
		t.Errorf("a machine XR created while the manager is down has %s=%q, want it paused at admission", infrav1.CrossplanePausedAnnotation, v)
	}
}

// responsive fails the test if Crossplane's watch circuit breaker opened on
// any XR.
func responsive(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, kind := range []string{"CrossplaneCluster", "CrossplaneMachine"} {
		xrs, err := listAll(ctx, infrav1.GroupVersion.String(), kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, xr := range xrs {
			conds, _, _ := unstructured.NestedSlice(xr.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Responsive" && m["status"] != "True" {
					t.Errorf("Crossplane's watch circuit opened on %s %s: %v", kind, xr.GetName(), m)
				}
			}
		}
	}
}
