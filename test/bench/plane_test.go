package bench

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers"
	"github.com/capxp/cluster-api-provider-crossplane/dev/lifeline"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

var planeMachinesFlag = flag.Int("plane-machines", 30, "machines of the example cluster on the real plane (L3)")

func TestMain(m *testing.M) {
	// The plane starts etcd and kube-apiserver through links to this test
	// binary, so that they die with it.
	lifeline.Main()
	if kubeconfig := os.Getenv(watcherEnv); kubeconfig != "" {
		if err := runWatcher(kubeconfig); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestBenchPlane is L3: the example cluster of `make dev`, scaled to N
// machines, on the real plane (Crossplane, its functions, provider-kubernetes
// and the local backend, CAPI, and `capxp manager` as a process). It prints
// T_all, Machine created → provisioned p50/p99, each component's CPU time,
// the bridge's next to Crossplane's, and the bridge's live heap per cached
// object, from idle to N machines and from N to N + N/2 (at least 10 more;
// the first includes what the first machines start once); with
// CAPXP_BENCH_WATCHER, the CPU and heap of watching alone beside them. `make
// bench-plane` runs it; `go test` skips it.
func TestBenchPlane(t *testing.T) {
	bin := os.Getenv("CAPXP_MANAGER_BINARY")
	if os.Getenv("CAPXP_BENCH_PLANE") == "" || bin == "" {
		t.Skip("the plane benchmark runs with `make bench-plane` (CAPXP_BENCH_PLANE=1, CAPXP_MANAGER_BINARY)")
	}
	n := *planeMachinesFlag
	if n < plane.ExampleMachines || n > 1000 {
		t.Fatalf("-plane-machines must be between %d and 1000", plane.ExampleMachines)
	}
	// The watcher's informers log through controller-runtime's logger.
	envtest.ControllerLogs("CAPXP_BENCH_LOGS")
	ctx := t.Context()
	// CAPXP_BENCH_AUDIT=1 keeps the management API server's audit log of
	// writes (who wrote what, and which writes conflicted) in the plane's
	// folder; it costs the API server some CPU.
	audit := os.Getenv("CAPXP_BENCH_AUDIT") != ""
	p, err := plane.Start(ctx, plane.Options{ManagerBinary: bin, Tools: tools.Dir(envtest.ToolsDir()), AuditManagement: audit})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if audit {
		t.Logf("the management API server's audit log: %s", p.ManagementAuditLog())
	}
	c := p.Management().Client

	watch, err := cache.New(p.Management().Config, cache.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = watch.Start(ctx) }()
	lat, err := watchLatencies(ctx, watch, plane.ExampleNamespace)
	if err != nil {
		t.Fatal(err)
	}
	updates := map[string]int{}
	var updatesMu sync.Mutex
	for kind, obj := range map[string]client.Object{"CrossplaneMachine": &infrav1.CrossplaneMachine{}, "Machine": &clusterv1.Machine{}, "Cluster": &clusterv1.Cluster{}, "CrossplaneCluster": &infrav1.CrossplaneCluster{}} {
		inf, err := watch.GetInformer(ctx, obj)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(_, _ any) {
			updatesMu.Lock()
			updates[kind]++
			updatesMu.Unlock()
		}}); err != nil {
			t.Fatal(err)
		}
	}
	watch.WaitForCacheSync(ctx)

	heap0, err := liveHeap(ctx, p.ManagerProfilerURL(), p.ManagerMetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	objects0 := cachedObjects(ctx, t, c)
	rec0, err := managerReconciles(ctx, p.ManagerMetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	// CAPXP_BENCH_WATCHER=1: what watching alone costs, side by side with
	// the bridge. One more watcher of every XR loads the API server, and
	// Crossplane loops more often for it (see loopedReconciles).
	var w *watcher
	if os.Getenv("CAPXP_BENCH_WATCHER") != "" {
		if w, err = startWatcher(ctx, p.Kubeconfig()); err != nil {
			t.Fatal(err)
		}
		defer w.stop()
	}
	// What the components use with nothing to do, to tell it from the work.
	idle0 := p.CPU()
	const idleFor = 10 * time.Second
	time.Sleep(idleFor)
	cpu0 := p.CPU()
	at0, err := snapshot(ctx, p, w)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	// CAPXP_BENCH_PROFILE=FILE keeps a 60 s CPU profile of the manager while it
	// provisions (go tool pprof bin/capxp FILE).
	var profile chan error
	if path := os.Getenv("CAPXP_BENCH_PROFILE"); path != "" {
		profile = make(chan error, 1)
		go func() { profile <- fetch(ctx, p.ManagerProfilerURL()+"profile?seconds=60", path) }()
	}
	if err := p.ApplyExample(ctx); err != nil {
		t.Fatal(err)
	}
	// The example has one control plane Machine and a MachineDeployment of
	// workers, which makes up the rest.
	md := &clusterv1.MachineDeployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: plane.ExampleNamespace, Name: "demo-workers"}, md); err != nil {
		t.Fatal(err)
	}
	before := md.DeepCopy()
	md.Spec.Replicas = ptr.To(int32(n - 1)) //nolint:gosec // n is at most 1000.
	if err := c.Patch(ctx, md, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitForExample(ctx, n, 20*time.Minute, func(plane.Status) {}); err != nil {
		t.Fatal(err)
	}
	tAll := time.Since(begin)
	cpu1 := p.CPU()
	at1, err := snapshot(ctx, p, w)
	if err != nil {
		t.Fatal(err)
	}
	if profile != nil {
		if err := <-profile; err != nil {
			t.Error(err)
		}
	}
	// The live heap is measured after a GC; give the manager a few.
	time.Sleep(10 * time.Second)
	heap1, err := liveHeap(ctx, p.ManagerProfilerURL(), p.ManagerMetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	watcherHeap1, err := w.heap()
	if err != nil {
		t.Fatal(err)
	}
	// CAPXP_BENCH_HEAP_PROFILE=FILE keeps the manager's heap profile once
	// it has provisioned, and FILE.more once it has provisioned N/2 more
	// (go tool pprof -sample_index=inuse_space -diff_base FILE FILE.more;
	// GODEBUG=memprofilerate=512 samples finely enough).
	if path := os.Getenv("CAPXP_BENCH_HEAP_PROFILE"); path != "" {
		if err := fetch(ctx, p.ManagerProfilerURL()+"heap?gc=1", path); err != nil {
			t.Error(err)
		}
	}
	objects1 := cachedObjects(ctx, t, c)
	rec1, err := managerReconciles(ctx, p.ManagerMetricsURL())
	if err != nil {
		t.Fatal(err)
	}

	p50, p99 := lat.quantiles()
	updatesMu.Lock()
	var ups []string
	for kind, u := range updates {
		ups = append(ups, fmt.Sprintf("%s=%.1f", kind, float64(u)/float64(n)))
	}
	updatesMu.Unlock()
	sort.Strings(ups)

	// The heap above grew by more than the cached objects: kinds learned,
	// watches and pools started with the first machines. The heap of one
	// more cached object is what more machines add once those are there.
	more := max(n/2, 10)
	if err := c.Get(ctx, client.ObjectKeyFromObject(md), md); err != nil {
		t.Fatal(err)
	}
	before = md.DeepCopy()
	md.Spec.Replicas = ptr.To(int32(n - 1 + more)) //nolint:gosec // n is at most 1000.
	if err := c.Patch(ctx, md, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitForExample(ctx, n+more, 20*time.Minute, func(plane.Status) {}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second)
	heap2, err := liveHeap(ctx, p.ManagerProfilerURL(), p.ManagerMetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	watcherHeap2, err := w.heap()
	if err != nil {
		t.Fatal(err)
	}
	objects2 := cachedObjects(ctx, t, c)
	if path := os.Getenv("CAPXP_BENCH_HEAP_PROFILE"); path != "" {
		if err := fetch(ctx, p.ManagerProfilerURL()+"heap?gc=1", path+".more"); err != nil {
			t.Error(err)
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\nL3: %d machines (1 cluster) on the real plane\n\nT_all %.1f s, Machine created -> provisioned p50 %.1f s, p99 %.1f s\n\n| component | CPU during T_all | CPU idle, per second |\n|---|---|---|\n",
		n, tAll.Seconds(), p50.Seconds(), p99.Seconds())
	var names []string
	for name := range cpu1 {
		names = append(names, name)
	}
	sort.Strings(names)
	used := map[string]time.Duration{}
	for _, name := range names {
		used[name] = cpu1[name] - cpu0[name]
		fmt.Fprintf(&b, "| %s | %.2f s | %.0f ms |\n", name, used[name].Seconds(), float64((cpu0[name]-idle0[name]).Milliseconds())/idleFor.Seconds())
	}
	fmt.Fprintf(&b, "| kube-apiserver and etcd (management and workload) | %.2f s | |\n", (at1.apiServers - at0.apiServers).Seconds())
	var functions time.Duration
	for name, d := range used {
		if strings.HasPrefix(name, "function-") {
			functions += d
		}
	}
	bridge, core := used["capxp-manager"], used["crossplane"]
	fmt.Fprintf(&b, "\nbridge CPU / Crossplane core CPU = %.3f; / (core + functions) = %.3f\n",
		bridge.Seconds()/core.Seconds(), bridge.Seconds()/(core+functions).Seconds())
	if w != nil {
		watching := at1.watcher - at0.watcher
		fmt.Fprintf(&b, "watching alone (the bridge's cache of Machines, Clusters and their XRs, no controller): %.2f s; / Crossplane core CPU = %.3f; / (core + functions) = %.3f\n",
			watching.Seconds(), watching.Seconds()/core.Seconds(), watching.Seconds()/(core+functions).Seconds())
		fmt.Fprintf(&b, "bridge CPU / watching alone = %.2f (goal <= 1.5: %s)\n", bridge.Seconds()/watching.Seconds(), met(bridge <= watching*3/2))
	}
	if d := objects1 - objects0; d > 0 {
		fmt.Fprintf(&b, "bridge live heap %.1f MiB -> %.1f MiB over %d more cached objects: %.1f KiB per cached object\n",
			float64(heap0)/(1<<20), float64(heap1)/(1<<20), d, float64(heap1-heap0)/float64(d)/1024)
	}
	if d := objects2 - objects1; d > 0 {
		perObject := float64(heap2-heap1) / float64(d) / 1024
		fmt.Fprintf(&b, "bridge live heap, %d more machines: %.1f MiB -> %.1f MiB over %d more cached objects: %.1f KiB per cached object (goal <= 8 KiB: %s)\n",
			more, float64(heap1)/(1<<20), float64(heap2)/(1<<20), d, perObject, met(perObject <= 8))
		// The watcher caches the same objects, so that the bridge's own
		// share of the heap can be told from what caching them costs.
		if w != nil {
			watching := float64(watcherHeap2-watcherHeap1) / float64(d) / 1024
			fmt.Fprintf(&b, "watching alone, the same %d more machines: live heap %.1f MiB -> %.1f MiB: %.1f KiB per cached object; the bridge's beyond it: %.1f KiB\n",
				more, float64(watcherHeap1)/(1<<20), float64(watcherHeap2)/(1<<20), watching, perObject-watching)
		}
	}
	fmt.Fprintf(&b, "bridge reconciles per Machine: %s\n", perMachine(rec0, rec1, n, "%s=%.1f"))
	fmt.Fprintf(&b, "bridge requests per Machine (method and code): %s\n", perMachine(at0.requests, at1.requests, n, "%s=%.2f"))
	fmt.Fprintf(&b, "bridge wake-ups per Machine (XR kind and the kind whose event queued it; the queue merges some): %s\n",
		perMachine(at0.wakeups, at1.wakeups, n, "%s=%.2f"))
	fmt.Fprintf(&b, "updates per Machine, all writers: %s\n", strings.Join(ups, " "))
	xpReconciles := float64(at1.crossplane.reconciles-at0.crossplane.reconciles) / float64(n)
	fmt.Fprintf(&b, "Crossplane: %.1f composite reconciles per Machine, watch circuit breaker opened %d times\n",
		xpReconciles, at1.crossplane.circuitOpen-at0.crossplane.circuitOpen)
	if xpReconciles > loopedReconciles {
		fmt.Fprintf(&b, "Crossplane looped on its own status writes in this run (more than %d composite reconciles per Machine, "+
			"see docs/bridge.md, Conditions): its CPU, T_all and the ratios above are not comparable with a run where it did not\n", loopedReconciles)
	}
	if audit {
		writes, err := machineXRWrites(p.ManagementAuditLog())
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(auditReport(writes))
	}
	t.Log(b.String())
}

// cachedObjects counts the objects of the kinds the bridge caches that grow
// with a fleet: Clusters, Machines and their XRs.
func cachedObjects(ctx context.Context, t *testing.T, c client.Client) int {
	t.Helper()
	n := 0
	for _, l := range []client.ObjectList{&clusterv1.ClusterList{}, &clusterv1.MachineList{}, &infrav1.CrossplaneClusterList{}, &infrav1.CrossplaneMachineList{}} {
		if err := c.List(ctx, l); err != nil {
			t.Fatal(err)
		}
		n += meta.LenList(l)
	}
	return n
}

// liveHeap has the manager collect its garbage (pprof's heap profile with
// gc=1) and reads its live heap after that collection (runtime/metrics
// /gc/heap/live:bytes, which controller-runtime exports). Without the
// collection it is the live heap as of whenever the last one ran.
func liveHeap(ctx context.Context, profilerURL, url string) (int64, error) {
	if err := get(ctx, profilerURL+"heap?gc=1", func(r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		return err
	}); err != nil {
		return 0, err
	}
	var live float64
	found := false
	err := scrape(ctx, url, func(name, labels string, v float64) {
		if name == "go_gc_heap_live_bytes" {
			live, found = v, true
		}
	})
	if err == nil && !found {
		err = fmt.Errorf("%s serves no go_gc_heap_live_bytes", url)
	}
	return int64(live), err
}

// perMachine is what each key of a counter grew by between two readings,
// per Machine, as "key=value" in format, sorted.
func perMachine(before, after map[string]float64, machines int, format string) string {
	var out []string
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out = append(out, fmt.Sprintf(format, k, d/float64(machines)))
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// managerReconciles reads the manager's reconciles so far, per controller.
func managerReconciles(ctx context.Context, url string) (map[string]float64, error) {
	return counterBy(ctx, url, "controller_runtime_reconcile_total", "controller")
}

// loopedReconciles is how many composite reconciles per Machine tell that
// Crossplane looped on its own status writes: 14 to 23 when it does not, 40
// and more when it does.
const loopedReconciles = 25

// counters are what the benchmark counts at the start and the end of T_all:
// the manager's requests and what woke its XR reconcilers (counterBy), what
// Crossplane logged (crossplaneLog), the watcher's CPU and the API servers'
// and etcd's.
type counters struct {
	requests   map[string]float64
	wakeups    map[string]float64
	crossplane crossplaneCounts
	watcher    time.Duration
	apiServers time.Duration
}

func snapshot(ctx context.Context, p *plane.Plane, w *watcher) (counters, error) {
	var c counters
	var err error
	// client-go's requests by method and response code.
	if c.requests, err = counterBy(ctx, p.ManagerMetricsURL(), "rest_client_requests_total", "method", "code"); err != nil {
		return c, err
	}
	if c.wakeups, err = counterBy(ctx, p.ManagerMetricsURL(), "capxp_xr_wakeups_total", "kind", "source"); err != nil {
		return c, err
	}
	if c.crossplane, err = crossplaneLog(filepath.Join(p.Dir(), "crossplane.log")); err != nil {
		return c, err
	}
	// The plane's API servers and etcd are children of this process.
	c.apiServers = childCPU("kube-apiserver", "etcd")
	c.watcher, err = w.cpu()
	return c, err
}

// counterBy reads one of the manager's counters so far, summed by the
// values of the labels given, joined with "/".
func counterBy(ctx context.Context, url, metric string, keys ...string) (map[string]float64, error) {
	out := map[string]float64{}
	err := scrape(ctx, url, func(name, labels string, v float64) {
		if name != metric {
			return
		}
		values := map[string]string{}
		for _, l := range strings.Split(labels, ",") {
			k, val, _ := strings.Cut(l, "=")
			values[k] = strings.Trim(val, `"`)
		}
		key := make([]string, len(keys))
		for i, k := range keys {
			key[i] = values[k]
		}
		out[strings.Join(key, "/")] += v
	})
	return out, err
}

// crossplaneCounts is what Crossplane's debug log says it did so far.
type crossplaneCounts struct {
	// reconciles of composite resources, and how often a composite
	// resource's watch circuit breaker opened (too many events for it).
	reconciles, circuitOpen int
}

// crossplaneLog counts in Crossplane's log (the plane runs it with --debug).
func crossplaneLog(path string) (crossplaneCounts, error) {
	var c crossplaneCounts
	f, err := os.Open(path)
	if err != nil {
		return c, err
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		switch {
		case strings.Contains(line, "\tReconciling\t") && strings.Contains(line, `"controller": "composite/`):
			c.reconciles++
		case strings.Contains(line, "\tCircuit breaker is open\t"):
			c.circuitOpen++
		}
	}
	return c, s.Err()
}

// get reads what url serves.
func get(ctx context.Context, url string, read func(io.Reader) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	// Uncompressed: the gzip writer the metrics endpoint would make is
	// some 800 KB of the manager's heap, which a heap measurement would
	// count when a collection catches it.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return read(resp.Body)
}

// scrape reads a Prometheus text endpoint, sample by sample.
func scrape(ctx context.Context, url string, sample func(name, labels string, v float64)) error {
	return get(ctx, url, func(r io.Reader) error { return samples(r, sample) })
}

func samples(r io.Reader, sample func(name, labels string, v float64)) error {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		name, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
		sample(name, labels, v)
	}
	return s.Err()
}

// fetch writes what url serves to path.
func fetch(ctx context.Context, url, path string) error {
	return get(ctx, url, func(r io.Reader) error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, r); err != nil {
			_ = f.Close()
			return err
		}
		return f.Close()
	})
}
