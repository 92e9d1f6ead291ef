package bench

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/caching"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

var (
	clustersFlag = flag.Int("clusters", 10, "clusters per level")
	machinesFlag = flag.Int("machines", 3, "machines per cluster (one MachineDeployment)")
	sharedFlag   = flag.Bool("shared", false, "run every level on one API server and etcd, each level's workload deleted before the next (by default each level has its own)")
	orderFlag    = flag.String("order", strings.Join(balancedOrder(), ","), "the order the levels run in, comma-separated, each level as many times as the others: a level run later meets a warmer, busier machine, so the default runs them forward then backward, every level at the same mean place, and compares the sums of each level's runs")
)

// The levels, run one after the other on the same API server. L2 and
// L2-reported differ in the machines' Composition: L2's declares their
// provider ID (capxp.dev/provider-id), as the local and bring-your-own
// backends' do, and the bridge writes it when the gate opens; L2-reported's
// only reports it once the machine is provisioned, as a cloud's instance ID
// is, and the bridge copies it then, a new generation of the Ready XR.
const (
	levelIdeal    = "L0"
	levelDeclared = "L2"
	levelReported = "L2-reported"
)

// allLevels are the levels in the order the report shows them: L0, to
// which the others are compared, first.
var allLevels = []string{levelIdeal, levelDeclared, levelReported}

// balancedOrder runs the levels forward, then backward, the last level
// twice in a row: what running later costs, as the
// machine warms and the host's other tenants come and go, falls on every
// level alike when it grows steadily over the run.
func balancedOrder() []string {
	order := slices.Clone(allLevels)
	for _, l := range slices.Backward(allLevels) {
		order = append(order, l)
	}
	return order
}

// parseOrder reads the order the levels run in: every level, each as many
// times as the others, so that each level's sum over its runs is compared
// with L0's over as many.
func parseOrder(s string) ([]string, error) {
	order := strings.Split(s, ",")
	times := map[string]int{}
	for i, l := range order {
		l = strings.TrimSpace(l)
		if !slices.Contains(allLevels, l) {
			return nil, fmt.Errorf("-order: %q is not a level (the levels are %s)", l, strings.Join(allLevels, ", "))
		}
		times[l]++
		order[i] = l
	}
	for _, l := range allLevels {
		if times[l] != times[order[0]] {
			return nil, fmt.Errorf("-order: %q runs %s %d times and %s %d: every level (%s) runs as many times as the others", s, order[0], times[order[0]], l, times[l], strings.Join(allLevels, ", "))
		}
	}
	return order, nil
}

// result is one level's run.
type result struct {
	level string
	// ran is when the level ran: 1 first.
	ran      int
	tAll     time.Duration
	machines int
	provider *requests // the bridge (L2) or the ideal provider (L0)
	capi     *requests
	engine   *requests
	// reconciles per controller during the run.
	reconciles map[string]float64
	// p50 and p99 of Machine created → infrastructure provisioned.
	p50, p99 time.Duration
	// apiServerCPU is the CPU time kube-apiserver and etcd used;
	// controllersCPU the benchmark's own process: CAPI's controllers, the
	// level's provider (and L2's engine), the bootstrap provider.
	apiServerCPU, controllersCPU time.Duration
	// machine is what the whole machine's CPU did while the level ran:
	// whether something else ran, or the host took CPU away, tells a slow
	// run of the machine from a slow level.
	machine plane.MachineCPU
	// server is what the API server's own metrics grew by: admission
	// by plugin and policy, requests by verb, watch events.
	server serverMetrics
}

// runOrder names the levels in the order they ran.
func runOrder(rs []result) string {
	names := make([]string, len(rs))
	for i := range rs {
		if n := rs[i].ran; n >= 1 && n <= len(rs) {
			names[n-1] = rs[i].level
		}
	}
	return strings.Join(names, " → ")
}

// byLevel orders runs as the report shows them: by level, L0 first, and
// each level's runs in the order they ran.
func byLevel(rs []result) []result {
	out := slices.Clone(rs)
	slices.SortStableFunc(out, func(a, b result) int {
		if c := slices.Index(allLevels, a.level) - slices.Index(allLevels, b.level); c != 0 {
			return c
		}
		return a.ran - b.ran
	})
	return out
}

// name is how the report names a run: its level, and when a level ran
// more than once, which of the runs it was.
func (r *result) name(repeated bool) string {
	if !repeated {
		return r.level
	}
	return fmt.Sprintf("%s (run %d)", r.level, r.ran)
}

// sum is a level's runs added up: what the report compares.
type sum struct {
	level                             string
	runs, machines                    int
	tAll, p99, apiServerCPU, ctrlsCPU time.Duration
	providerWrites                    int
}

// sums adds up each level's runs, in allLevels' order; p99 too, so that
// over as many runs per level its ratio is that of the runs' means.
func sums(rs []result) []sum {
	out := make([]sum, len(allLevels))
	for i, l := range allLevels {
		out[i].level = l
	}
	for i := range rs {
		r := &rs[i]
		s := &out[slices.Index(allLevels, r.level)]
		s.runs++
		s.machines += r.machines
		s.tAll += r.tAll
		s.p99 += r.p99
		s.apiServerCPU += r.apiServerCPU
		s.ctrlsCPU += r.controllersCPU
		s.providerWrites += r.provider.total("write", "")
	}
	return out
}

// machineLine says what the machine's cores did while the level ran: this
// benchmark's process and its API server and etcd, everything else, the
// time the host took away, and idle.
func (r *result) machineLine() string {
	ours := r.apiServerCPU + r.controllersCPU
	// The kernel counts in ticks, the process counters too: what is left
	// for others is never below nothing.
	others := max(r.machine.Busy-ours, 0)
	return fmt.Sprintf("busy %.1f s (the benchmark, its API server and etcd %.1f s, every other process %.1f s), taken by the host %.1f s, idle %.1f s",
		r.machine.Busy.Seconds(), ours.Seconds(), others.Seconds(), r.machine.Stolen.Seconds(), r.machine.Idle.Seconds())
}

// TestBench provisions clusters × machines behind each level, one after the
// other in -order's order, and prints their costs side by side. `make bench` runs it; `go test` skips it.
func TestBench(t *testing.T) {
	if os.Getenv("CAPXP_BENCH") == "" {
		t.Skip("the benchmark runs with `make bench` (CAPXP_BENCH=1)")
	}
	// CAPXP_BENCH_LOGS=4 shows the controllers' logs, chatty lines too.
	envtest.ControllerLogs("CAPXP_BENCH_LOGS")
	ctx := t.Context()
	levels, err := parseOrder(*orderFlag)
	if err != nil {
		t.Fatal(err)
	}
	results := make([]result, 0, len(levels))
	var shared *envtest.Environment
	if *sharedFlag {
		if shared, err = newEnvironment(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = shared.Stop() }()
	}
	for i, level := range levels {
		env := shared
		if env == nil {
			if env, err = newEnvironment(ctx); err != nil {
				t.Fatal(err)
			}
		}
		var r result
		r, err = run(ctx, env, level, *clustersFlag, *machinesFlag, shared == nil || i == len(levels)-1)
		if shared == nil {
			_ = env.Stop()
		}
		if err != nil {
			t.Fatalf("%s: %v", level, err)
		}
		r.ran = i + 1
		results = append(results, r)
	}
	report(t, results)
}

// newEnvironment starts an API server and etcd with CAPXP's XRDs adapted
// for CAPI. Each level runs on its own by default: a level run after
// another on the same API server inherits its deleted objects (in etcd until
// a compaction, whose schedule then falls in one level or another), its
// watch caches and its heap, and measures more than itself.
func newEnvironment(ctx context.Context) (*envtest.Environment, error) {
	env, err := envtest.Start(ctx)
	if err != nil {
		return nil, err
	}
	if err := adaptXRDs(ctx, env); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return env, nil
}

// adaptXRDs lets a bridge label CAPXP's XRDs for CAPI and does what
// Crossplane's XRD controller would: copies the labels onto the CRDs.
func adaptXRDs(ctx context.Context, env *envtest.Environment) error {
	m, err := env.StartBridge(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = m.Stop() }()
	for _, name := range []string{"crossplaneclusters." + infrav1.GroupVersion.Group, "crossplanemachines." + infrav1.GroupVersion.Group} {
		deadline := time.Now().Add(time.Minute)
		for {
			crd, err := env.SyncXRD(ctx, name)
			if err != nil {
				return err
			}
			if crd.Labels[infrav1.CAPIContractLabel] != "" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the bridge did not label XRD %s", name)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// run provisions the workload behind one level and measures it.
func run(ctx context.Context, env *envtest.Environment, level string, clusters, machines int, lastOnServer bool) (result, error) {
	r := result{level: level, machines: clusters * machines, provider: newRequests(), capi: newRequests(), engine: newRequests()}
	before := reconcileTotals()

	capiEnv := *env.Environment
	capiEnv.Config = r.capi.wrap(env.Config)
	capi, err := capiEnv.StartCAPI(ctx)
	if err != nil {
		return r, err
	}
	defer func() { _ = capi.Stop() }()

	// The environment's own actor (the bootstrap provider), unmeasured.
	others, err := newManager(env.Config)
	if err != nil {
		return r, err
	}
	if err := (&bootstrapper{client: others.GetClient()}).setup(others); err != nil {
		return r, err
	}
	defer start(ctx, others)()

	switch level {
	case levelIdeal:
		// The ideal provider: the contract's fields, nothing else.
		stop, err := startActors(ctx, r.provider.wrap(env.Config), func(c client.Client, gvk schema.GroupVersionKind) actor {
			return &ideal{client: c, gvk: gvk}
		})
		if err != nil {
			return r, err
		}
		defer stop()
	default:
		b, err := env.StartBridgeAs(ctx, r.provider.wrap(env.Config), controllers.Options{Concurrency: 10})
		if err != nil {
			return r, err
		}
		defer func() { _ = b.Stop() }()
		stop, err := startActors(ctx, r.engine.wrap(env.Config), func(c client.Client, gvk schema.GroupVersionKind) actor {
			return &engine{client: c, gvk: gvk}
		})
		if err != nil {
			return r, err
		}
		defer stop()
	}

	ns, err := env.NewNamespace(ctx, "bench-"+strings.ToLower(level))
	if err != nil {
		return r, err
	}
	lat, err := watchLatencies(ctx, others.GetCache(), ns)
	if err != nil {
		return r, err
	}
	cpu, self := childCPU("kube-apiserver", "etcd"), selfCPU()
	stopProfile, err := profile(level)
	if err != nil {
		return r, err
	}
	apiServerProfiled, err := apiServerProfile(ctx, env.Config, level)
	if err != nil {
		return r, err
	}
	serverBefore, err := scrapeServer(ctx, env.Config)
	if err != nil {
		return r, err
	}
	machineBefore, err := plane.ReadMachineCPU()
	if err != nil {
		return r, err
	}
	begin := time.Now()
	if err := createWorkload(ctx, env.Client, ns, clusters, machines, level != levelReported); err != nil {
		return r, err
	}
	if err := waitProvisioned(ctx, env.Client, ns, clusters*machines, 10*time.Minute); err != nil {
		return r, err
	}
	r.tAll = time.Since(begin)
	stopProfile()
	r.apiServerCPU = childCPU("kube-apiserver", "etcd") - cpu
	r.controllersCPU = selfCPU() - self
	machineAfter, err := plane.ReadMachineCPU()
	if err != nil {
		return r, err
	}
	r.machine = machineAfter.Sub(machineBefore)
	serverAfter, err := scrapeServer(ctx, env.Config)
	if err != nil {
		return r, err
	}
	r.server = serverAfter.since(serverBefore)
	if err := apiServerProfiled(); err != nil {
		return r, err
	}
	r.p50, r.p99 = lat.quantiles()
	after := reconcileTotals()
	r.reconciles = map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			r.reconciles[k] = d
		}
	}
	r.provider.freeze()
	r.capi.freeze()
	r.engine.freeze()
	if !lastOnServer {
		// The next level's controllers must not find this level's clusters:
		// they would reconcile and write them on start.
		return r, deleteWorkload(ctx, env.Client, ns, 10*time.Minute)
	}
	return r, nil
}

// deleteWorkload deletes the Clusters in ns, through CAPI and the level's
// provider, and waits until nothing CAPI or the provider made is left.
func deleteWorkload(ctx context.Context, c client.Client, ns string, within time.Duration) error {
	if err := c.DeleteAllOf(ctx, &clusterv1.Cluster{}, client.InNamespace(ns)); err != nil {
		return err
	}
	deadline := time.Now().Add(within)
	for {
		var left int
		for _, l := range []client.ObjectList{&clusterv1.ClusterList{}, &clusterv1.MachineList{}, &infrav1.CrossplaneMachineList{}, &infrav1.CrossplaneClusterList{}} {
			if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
				return err
			}
			left += meta.LenList(l)
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d objects of namespace %s left after %s", left, ns, within)
		}
		time.Sleep(time.Second)
	}
}

// newManager is a manager for the benchmark's own actors.
// actor is one simulated controller of the benchmark.
type actor interface{ setup(ctrl.Manager) error }

// startActors starts a manager as cfg's user running one actor for each of
// the cluster and machine kinds; it returns what stops it.
func startActors(ctx context.Context, cfg *rest.Config, of func(client.Client, schema.GroupVersionKind) actor) (func(), error) {
	mgr, err := newManager(cfg)
	if err != nil {
		return nil, err
	}
	for _, gvk := range []schema.GroupVersionKind{clusterGVK, machineGVK} {
		if err := of(mgr.GetClient(), gvk).setup(mgr); err != nil {
			return nil, err
		}
	}
	return start(ctx, mgr), nil
}

func newManager(cfg *rest.Config) (ctrl.Manager, error) {
	return ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 controllers.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Client:                 caching.ClientOptions(),
	})
}

// start runs a manager until the returned function stops it.
func start(ctx context.Context, mgr ctrl.Manager) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = mgr.Start(ctx)
	}()
	mgr.GetCache().WaitForCacheSync(ctx)
	return func() { cancel(); <-done }
}

// createWorkload creates clusters, each with its XR and a MachineDeployment
// of machines, as a platform team's GitOps tool would, all at once.
func createWorkload(ctx context.Context, c client.Client, ns string, clusters, machines int, declared bool) error {
	if machines < 0 || machines > math.MaxInt32 {
		return fmt.Errorf("cannot run %d machines per cluster", machines)
	}
	for _, o := range []client.Object{
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": bootstrapGVK.GroupVersion().String(), "kind": "TestBootstrapConfigTemplate",
			"metadata": map[string]any{"namespace": ns, "name": "workers"},
			"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{}}},
		}},
		&infrav1.CrossplaneMachineTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers"},
			Spec: infrav1.CrossplaneMachineTemplateSpec{Template: infrav1.CrossplaneMachineTemplateResource{
				Spec: infrav1.CrossplaneMachineSpec{
					Parameters: infrav1.CrossplaneMachineParameters{Size: "m6i.large"},
					Crossplane: &infrav1.CompositionSpec{CompositionRef: &infrav1.NameReference{Name: machineComposition}},
				},
			}},
		},
	} {
		if err := c.Create(ctx, o); err != nil {
			return err
		}
	}
	if err := applyMachineComposition(ctx, c, declared); err != nil {
		return err
	}
	for i := range clusters {
		name := fmt.Sprintf("c%03d", i)
		xr := &infrav1.CrossplaneCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		cluster := &clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: clusterGVK.Group, Kind: clusterGVK.Kind, Name: name,
			}},
		}
		md := envtest.MachineDeployment(ns, name, name+"-workers", "workers", "zone-a", int32(machines))
		for _, o := range []client.Object{xr, cluster, md} {
			if err := c.Create(ctx, o); err != nil {
				return err
			}
		}
	}
	return nil
}

// machineComposition is the Composition the machine XRs name: the engine
// stands in for it.
const machineComposition = "bench-machine"

// applyMachineComposition creates or updates the machines' Composition;
// declared, it declares what the engine will report as their provider ID.
func applyMachineComposition(ctx context.Context, c client.Client, declared bool) error {
	comp := &xpextv1.Composition{ObjectMeta: metav1.ObjectMeta{Name: machineComposition}}
	_, err := controllerutil.CreateOrUpdate(ctx, c, comp, func() error {
		comp.Annotations = nil
		if declared {
			comp.Annotations = map[string]string{infrav1.ProviderIDAnnotation: providerIDScheme + "{metadata.name}"}
		}
		comp.Spec = xpextv1.CompositionSpec{
			CompositeTypeRef: xpextv1.TypeReferenceTo(machineGVK),
			Mode:             xpextv1.CompositionModePipeline,
			Pipeline:         []xpextv1.PipelineStep{{Step: "engine", FunctionRef: xpextv1.FunctionReference{Name: "bench-engine"}}},
		}
		return nil
	})
	return err
}

// waitProvisioned waits until n Machines in ns have their infrastructure
// provisioned.
func waitProvisioned(ctx context.Context, c client.Client, ns string, n int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		ms := &clusterv1.MachineList{}
		if err := c.List(ctx, ms, client.InNamespace(ns)); err != nil {
			return err
		}
		done := 0
		for i := range ms.Items {
			if ptr.Deref(ms.Items[i].Status.Initialization.InfrastructureProvisioned, false) {
				done++
			}
		}
		if done >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d machines provisioned after %s", done, n, within)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// reconcileTotals reads controller-runtime's reconcile counters, per
// controller, from this process's metrics registry.
func reconcileTotals() map[string]float64 {
	out := map[string]float64{}
	families, err := metrics.Registry.Gather()
	if err != nil {
		return out
	}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			out[label(m, "controller")] += m.GetCounter().GetValue()
		}
	}
	return out
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT MET"
}

// report prints the runs side by side, L0's first, and each bridge level's
// ratios to L0 over the sums of their runs.
func report(t *testing.T, rs []result) {
	t.Helper()
	rs = byLevel(rs)
	repeated := len(rs) > len(allLevels)
	var b strings.Builder
	fmt.Fprintf(&b, "\nN = %d machines (%d clusters x %d); %s: provider IDs declared by the Composition, %s: reported once provisioned; run in the order %s\n\n",
		rs[0].machines, *clustersFlag, *machinesFlag, levelDeclared, levelReported, runOrder(rs))
	fmt.Fprintf(&b, "| level | T_all | p50 | p99 | API server + etcd CPU | controllers' CPU | provider writes/Machine | provider reads/Machine | events/Machine | CAPI writes/Machine | engine writes/Machine |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i := range rs {
		r := &rs[i]
		n := float64(r.machines)
		fmt.Fprintf(&b, "| %s | %.1f s | %.1f s | %.1f s | %.1f s | %.1f s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r.name(repeated), r.tAll.Seconds(),
			r.p50.Seconds(), r.p99.Seconds(), r.apiServerCPU.Seconds(), r.controllersCPU.Seconds(),
			float64(r.provider.total("write", ""))/n, float64(r.provider.total("read", ""))/n, float64(r.provider.total("write", "events"))/n,
			float64(r.capi.total("write", ""))/n, float64(r.engine.total("write", ""))/n)
	}
	// What the API server did, by its own metrics: where its CPU went.
	fmt.Fprintf(&b, "\nThe API server, per Machine (its own metrics):\n\n| level | admission | policies' match conditions | policies' validations and mutations | gets | lists | watches | watch events | writes |\n|---|---|---|---|---|---|---|---|---|\n")
	for i := range rs {
		r := &rs[i]
		n := float64(r.machines)
		s := r.server
		var admission, matched, matches, checked, checks, writes float64
		for _, name := range s.names(pluginSeconds) {
			admission += s[pluginSeconds+name]
		}
		for _, p := range s.names(matchSeconds) {
			matched, matches = matched+s[matchSeconds+p], matches+s[matchCount+p]
		}
		for _, p := range s.names(checkSeconds) {
			checked, checks = checked+s[checkSeconds+p], checks+s[checkCount+p]
		}
		for _, v := range []string{"post", "put", "patch", "apply", "delete", "deletecollection"} {
			writes += s[verbCount+v]
		}
		fmt.Fprintf(&b, "| %s | %.2f ms | %.3f ms (%.1f) | %.3f ms (%.1f) | %.1f | %.1f | %.2f | %.1f | %.1f |\n", r.name(repeated), 1000*admission/n,
			1000*matched/n, matches/n, 1000*checked/n, checks/n, s[verbCount+"get"]/n, s[verbCount+"list"]/n, s[verbCount+"watch"]/n, s[watchEvents]/n, writes/n)
	}
	b.WriteString(ratios(sums(rs)))
	for i := range rs {
		r := &rs[i]
		name := r.name(repeated)
		fmt.Fprintf(&b, "\n%s provider writes: %s\n%s provider reads: %s\n%s CAPI writes: %s\n", name, strings.Join(r.provider.lines("write"), " "),
			name, strings.Join(r.provider.lines("read"), " "), name, strings.Join(r.capi.lines("write"), " "))
		var names []string
		for k := range r.reconciles {
			names = append(names, k)
		}
		sort.Strings(names)
		var recs []string
		for _, k := range names {
			recs = append(recs, fmt.Sprintf("%s=%.1f", k, r.reconciles[k]/float64(r.machines)))
		}
		fmt.Fprintf(&b, "%s reconciles per Machine: %s\n", name, strings.Join(recs, " "))
		fmt.Fprintf(&b, "%s the machine while it ran: %s\n", name, r.machineLine())
		fmt.Fprintf(&b, "%s admission per Machine: %s\n", name, strings.Join(r.server.admissionLines(r.machines), "; "))
		fmt.Fprintf(&b, "%s watch events per Machine: %s\n", name, strings.Join(r.server.watchLines(r.machines), " "))
		fmt.Fprintf(&b, "%s writes per Machine by kind, with the API server's time handling them: %s\n", name, strings.Join(r.server.writeLines(r.machines), "; "))
	}
	t.Log(b.String())
	_ = corev1.SchemeGroupVersion
}

// ratios compares each bridge level's runs, summed, with L0's: a level
// that ran more than once is compared over all its runs, so that where in
// the run each ran weighs on every level alike.
func ratios(ss []sum) string {
	var b strings.Builder
	l0 := &ss[0]
	for i := range ss[1:] {
		l2 := &ss[1+i]
		if l2.runs == 0 || l0.runs == 0 {
			continue
		}
		over := ""
		if l2.runs > 1 {
			over = fmt.Sprintf(" (over %d runs each)", l2.runs)
		}
		tAll, p99 := l2.tAll.Seconds()/l0.tAll.Seconds(), l2.p99.Seconds()/l0.p99.Seconds()
		apiServer := l2.apiServerCPU.Seconds() / l0.apiServerCPU.Seconds()
		writes := float64(l2.providerWrites)/float64(l2.machines) - float64(l0.providerWrites)/float64(l0.machines)
		fmt.Fprintf(&b, "\n%s/%s%s: T_all %.2f, p99 %.2f, API server + etcd CPU %.2f, controllers' CPU %.2f; provider writes per Machine %s %+.2f\n",
			l2.level, l0.level, over, tAll, p99, apiServer, l2.ctrlsCPU.Seconds()/l0.ctrlsCPU.Seconds(), l0.level, writes)
		// The goals are set for N = 1000; below, the bridge's fixed costs
		// (its admission objects, the XRDs' access reviews) weigh on every
		// Machine.
		fmt.Fprintf(&b, "goals for %s (set for N = 1000): T_all <= 1.1 x %s: %s; API server + etcd CPU <= 1.15 x %s: %s; p99 <= 1.2 x %s: %s; writes per Machine <= %s + 1: %s\n",
			l2.level, l0.level, met(tAll <= 1.1), l0.level, met(apiServer <= 1.15), l0.level, met(p99 <= 1.2), l0.level, met(writes <= 1))
	}
	return b.String()
}
