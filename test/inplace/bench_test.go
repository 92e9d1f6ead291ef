package inplace

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/inplace"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
)

var (
	benchMachines = flag.Int("bench-machines", 100, "TestBenchInPlace: the workers of the MachineDeployment it changes")
	benchBatch    = flag.Int("bench-batch", 10, "TestBenchInPlace: the MachineDeployment's maxUnavailable (maxSurge is 0), the same for both changes")
)

// TestBenchInPlace changes the size of every worker of an N-machine
// MachineDeployment (the topology example's, workerMachineSize) twice, side
// by side on one plane with the same rollout strategy: first in place,
// through CAPXP's extension; then, with the extension unregistered (as
// CAPXP_IN_PLACE_UPDATES=false leaves it), the same kind of change as CAPI's
// rolling replacement. It prints each change's time until every worker runs
// the new size on its Node, the Machines replaced, and the CPU the plane's
// components used meanwhile. `make bench-inplace` runs it alone; `go test`
// skips it.
func TestBenchInPlace(t *testing.T) {
	if os.Getenv("CAPXP_BENCH_INPLACE") == "" {
		t.Skip("the in-place benchmark runs with `make bench-inplace` (CAPXP_BENCH_INPLACE=1)")
	}
	n, batch := *benchMachines, *benchBatch
	if n < 2 || n > 500 || batch < 1 || batch > n {
		t.Fatalf("-bench-machines must be between 2 and 500, -bench-batch between 1 and -bench-machines")
	}
	ctx := t.Context()
	c := p.Management().Client
	e, err := plane.ExampleNamed("topology")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, &clusterv1.Cluster{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Cluster %s/%s exists already (%v): run the benchmark alone, with `make bench-inplace`", ns, cluster, err)
	}
	if err := p.ApplyNamedExample(ctx, e); err != nil {
		t.Fatal(err)
	}
	setTopology(t, c, func(cl *clusterv1.Cluster) {
		md := &cl.Spec.Topology.Workers.MachineDeployments[0]
		md.Replicas = new(int32(n)) //nolint:gosec // n is at most 500.
		u := &md.Rollout.Strategy
		u.Type = clusterv1.RollingUpdateMachineDeploymentStrategyType
		u.RollingUpdate.MaxSurge = new(intstr.FromInt32(0))
		u.RollingUpdate.MaxUnavailable = new(intstr.FromInt32(int32(batch))) //nolint:gosec // batch is at most 500.
	})
	start := time.Now()
	controlPlane := e.Machines - 2
	if err := p.WaitForExampleAvailable(ctx, e.Cluster, controlPlane+n, 20*time.Minute, func(plane.Status) {}); err != nil {
		t.Fatal(err)
	}
	// Available counts Machines; their MachineDeployment's status follows.
	waitFor(t, "every worker of size small", 5*time.Minute, func() error { return fleetIs(ctx, c, n, "small") })
	t.Logf("%d workers provisioned in %s", n, time.Since(start).Round(time.Second))
	registered(t, c)

	inPlace := change(t, c, "in place", n, "large")

	// Unregistered: CAPI finds no extension to ask, and rolls.
	ec := &runtimev1.ExtensionConfig{ObjectMeta: metav1.ObjectMeta{Name: inplace.ExtensionConfigName}}
	if err := c.Delete(ctx, ec); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "CAPI to unregister the extension", time.Minute, func() error {
		log, err := os.ReadFile(filepath.Join(p.Dir(), "capi-controller-manager.log"))
		if err != nil {
			return err
		}
		if !strings.Contains(string(log), "Unregistering ExtensionConfig") {
			return fmt.Errorf("CAPI's log does not say it unregistered %s yet", ec.Name)
		}
		return nil
	})
	rolling := change(t, c, "rolling (extension unregistered)", n, "medium")

	var b strings.Builder
	fmt.Fprintf(&b, "\nIn-place update of a %d-worker MachineDeployment (maxSurge 0, maxUnavailable %d), side by side on one plane\n\n", n, batch)
	fmt.Fprintf(&b, "| change | time until every worker runs the new size | Machines replaced | Machines created | CPU of the plane's components |\n|---|---|---|---|---|\n")
	for _, r := range []changed{inPlace, rolling} {
		fmt.Fprintf(&b, "| %s | %.1f s | %d | %d | %.1f s |\n", r.what, r.took.Seconds(), r.replaced, r.created, r.cpu.Seconds())
	}
	fmt.Fprintf(&b, "\nin place / rolling: time %.2f, CPU %.2f\n", inPlace.took.Seconds()/rolling.took.Seconds(), inPlace.cpu.Seconds()/rolling.cpu.Seconds())
	fmt.Fprintf(&b, "CPU by component (in place, rolling): %s\n", cpuByComponent(inPlace.byComponent, rolling.byComponent))
	t.Log(b.String())
	if inPlace.replaced != 0 {
		t.Errorf("the in-place change replaced %d Machines, want 0", inPlace.replaced)
	}
	if rolling.replaced != n {
		t.Errorf("the rolling change replaced %d Machines, want all %d", rolling.replaced, n)
	}
}

// changed is what one change of the workers' size took.
type changed struct {
	what              string
	took, cpu         time.Duration
	replaced, created int
	byComponent       map[string]time.Duration
}

// change sets workerMachineSize and waits until all n workers run it.
func change(t *testing.T, c client.Client, what string, n int, size string) changed {
	t.Helper()
	ctx := t.Context()
	before := workerMachines(t, c)
	cpu0 := p.CPU()
	start := time.Now()
	setTopology(t, c, func(cl *clusterv1.Cluster) { setVariable(t, cl, "workerMachineSize", size) })
	waitFor(t, fmt.Sprintf("every worker of size %s", size), 30*time.Minute, func() error { return fleetIs(ctx, c, n, size) })
	took := time.Since(start)
	cpu1 := p.CPU()
	after := workerMachines(t, c)
	r := changed{what: what, took: took, byComponent: map[string]time.Duration{}}
	for _, m := range before {
		if !slices.Contains(after, m) {
			r.replaced++
		}
	}
	for _, m := range after {
		if !slices.Contains(before, m) {
			r.created++
		}
	}
	for name, d := range cpu1 {
		r.byComponent[name] = d - cpu0[name]
		r.cpu += d - cpu0[name]
	}
	t.Logf("%s: %d workers of size %s in %s; %d replaced", r.what, n, size, took.Round(time.Second), r.replaced)
	return r
}

// fleetIs says what keeps the MachineDeployment's n workers from all
// running size: the MachineDeployment rolled out (every Machine up to date
// and available, none updating in place), each worker's XR of the size, its
// Node labelled with it. It lists each kind once: at a hundred workers,
// reading each object on every poll would load the API server it measures.
func fleetIs(ctx context.Context, c client.Client, n int, size string) error {
	mds := &clusterv1.MachineDeploymentList{}
	sel := client.MatchingLabels{clusterv1.ClusterNameLabel: cluster, clusterv1.ClusterTopologyMachineDeploymentNameLabel: workers}
	if err := c.List(ctx, mds, client.InNamespace(ns), sel); err != nil {
		return err
	}
	if len(mds.Items) != 1 {
		return fmt.Errorf("%d MachineDeployments of topology %s", len(mds.Items), workers)
	}
	md := &mds.Items[0]
	want := int32(n) //nolint:gosec // n is at most 500.
	if ptrValue(md.Spec.Replicas) != want || ptrValue(md.Status.Replicas) != want || ptrValue(md.Status.UpToDateReplicas) != want || ptrValue(md.Status.AvailableReplicas) != want {
		return fmt.Errorf("MachineDeployment %s: %d Machines, %d up to date, %d available, want %d", md.Name, ptrValue(md.Status.Replicas), ptrValue(md.Status.UpToDateReplicas), ptrValue(md.Status.AvailableReplicas), want)
	}
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(ns), sel); err != nil {
		return err
	}
	xrs := &infrav1.CrossplaneMachineList{}
	if err := c.List(ctx, xrs, client.InNamespace(ns)); err != nil {
		return err
	}
	sizes := map[string]string{}
	for i := range xrs.Items {
		sizes[xrs.Items[i].Name] = xrs.Items[i].Spec.Parameters.Size
	}
	nodes := &corev1.NodeList{}
	if err := p.Workload.Client.List(ctx, nodes); err != nil {
		return err
	}
	labelled := map[string]string{}
	for i := range nodes.Items {
		labelled[nodes.Items[i].Name] = nodes.Items[i].Labels[instanceType]
	}
	var not []string
	for i := range machines.Items {
		m := &machines.Items[i]
		switch _, updating := m.Annotations[clusterv1.UpdateInProgressAnnotation]; {
		case updating:
			not = append(not, m.Name+" updating in place")
		case sizes[m.Spec.InfrastructureRef.Name] != size:
			not = append(not, fmt.Sprintf("%s's XR of size %q", m.Name, sizes[m.Spec.InfrastructureRef.Name]))
		case !m.Status.NodeRef.IsDefined():
			not = append(not, m.Name+" without a Node")
		case labelled[m.Status.NodeRef.Name] != size:
			not = append(not, fmt.Sprintf("%s's Node labelled %q", m.Name, labelled[m.Status.NodeRef.Name]))
		}
	}
	if len(machines.Items) != n {
		return fmt.Errorf("%d workers, want %d", len(machines.Items), n)
	}
	if len(not) > 0 {
		sort.Strings(not)
		return fmt.Errorf("%d of %d workers not done, e.g. %s", len(not), n, strings.Join(not[:min(len(not), 3)], "; "))
	}
	return nil
}

// cpuByComponent prints each component's CPU in both changes.
func cpuByComponent(a, b map[string]time.Duration) string {
	var names []string
	for name := range a {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]string, 0, len(names))
	for _, name := range names {
		out = append(out, fmt.Sprintf("%s %.1f/%.1f s", name, a[name].Seconds(), b[name].Seconds()))
	}
	return strings.Join(out, ", ")
}
