package envtest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/controllers"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/caching"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/restmapper"
	"github.com/capxp/cluster-api-provider-crossplane/dev/localkube"
)

// Writes counts the API writes a manager's client made, per object, those
// of them the API server refused as conflicts, and the requests it refused
// for want of permission.
type Writes struct {
	mu        sync.Mutex
	counts    map[string]int
	conflicts map[string]int
	forbidden int
}

func (w *Writes) refused(err error) error {
	if apierrors.IsForbidden(err) {
		w.mu.Lock()
		w.forbidden++
		w.mu.Unlock()
	}
	return err
}

// written records the outcome of a write to key: a conflict changed nothing.
func (w *Writes) written(key string, err error) error {
	if apierrors.IsConflict(err) {
		w.mu.Lock()
		w.conflicts[key]++
		w.mu.Unlock()
	}
	return w.refused(err)
}

// Count returns the writes made to an object of a kind, conflicts included.
func (w *Writes) Count(kind, namespace, name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[kind+"/"+namespace+"/"+name]
}

// Conflicts returns the writes to an object of a kind that the API server
// refused as conflicts: they changed nothing, and woke no one.
func (w *Writes) Conflicts(kind, namespace, name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conflicts[kind+"/"+namespace+"/"+name]
}

// add counts a write of obj, and returns its key.
func (w *Writes) add(c client.WithWatch, obj client.Object) string {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		gvk = obj.GetObjectKind().GroupVersionKind()
	}
	key := gvk.Kind + "/" + obj.GetNamespace() + "/" + obj.GetName()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[key]++
	return key
}

// addApplied counts a server-side apply, of an object or a subresource,
// and returns its key.
func (w *Writes) addApplied(obj runtime.ApplyConfiguration) string {
	var o struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
	}
	raw, err := json.Marshal(obj)
	if err == nil {
		err = json.Unmarshal(raw, &o)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	key := o.Kind + "/" + o.Metadata.Namespace + "/" + o.Metadata.Name
	if err != nil {
		key = "unknown"
	}
	w.counts[key]++
	return key
}

// Manager is a controller manager running in a test.
type Manager struct {
	ctrl.Manager
	// Writes counts what the manager's client wrote.
	Writes *Writes
	// Logs keeps the manager's log lines at info level (its controllers'
	// reconcile logs excluded), for tests of what it started and stopped.
	Logs *Logs

	name   string
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Forbidden counts the requests the API server refused the manager for want
// of permission.
func (m *Manager) Forbidden() int {
	m.Writes.mu.Lock()
	defer m.Writes.mu.Unlock()
	return m.Writes.forbidden
}

// Stop stops the manager and waits for it.
func (m *Manager) Stop() error {
	m.cancel()
	<-m.done
	if localkube.ShutdownStuck(m.err) {
		// What did not end is still blocked: say where.
		var phase []string
		if m.Logs != nil {
			phase = m.Logs.Containing("Stopping and waiting")
		}
		return errors.Errorf("%v (goroutines in %s; the shutdown's phases: %q); those of %s:\n%s", m.err, localkube.DumpGoroutines(m.name), phase, m.name, localkube.Goroutines(m.name))
	}
	return m.err
}

// StartBridge starts CAPXP's bridge as `capxp manager` runs it, with a client
// that counts writes.
func (e *Environment) StartBridge(ctx context.Context) (*Manager, error) {
	return e.StartBridgeAs(ctx, e.Config, controllers.Options{})
}

// StartBridgeAs starts the bridge with the given identity and options (its
// concurrency 2 unless o says, its webhook served here whatever o says).
func (e *Environment) StartBridgeAs(ctx context.Context, cfg *rest.Config, o controllers.Options) (*Manager, error) {
	w := &Writes{counts: map[string]int{}, conflicts: map[string]int{}}
	logs := &Logs{}
	serving, webhookClient := e.webhookServing()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Logger:                 funcr.New(logs.add, funcr.Options{Verbosity: logs.verbosity(), LogTimestamp: true}),
		WebhookServer:          webhook.NewServer(serving),
		Scheme:                 controllers.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// In-flight reconciles finish slowly on a loaded machine.
		GracefulShutdownTimeout: ptr.To(2 * time.Minute),
		Cache:                   caching.Options("", 10*time.Minute),
		NewCache:                caching.New,
		MapperProvider:          restmapper.New,
		Client:                  caching.ClientOptions(),
		// Each test starts its own managers in one test binary.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		NewClient: func(cfg *rest.Config, o client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, o)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					return w.refused(c.Get(ctx, key, obj, opts...))
				},
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					return w.refused(c.List(ctx, list, opts...))
				},
				Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
					key := w.addApplied(obj)
					return w.written(key, c.Apply(ctx, obj, opts...))
				},
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					key := w.add(c, obj)
					return w.written(key, c.Create(ctx, obj, opts...))
				},
				Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
					key := w.add(c, obj)
					return w.written(key, c.Update(ctx, obj, opts...))
				},
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
					key := w.add(c, obj)
					return w.written(key, c.Patch(ctx, obj, p, opts...))
				},
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					key := w.add(c, obj)
					return w.written(key, c.Delete(ctx, obj, opts...))
				},
				SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
					key := w.add(c.(client.WithWatch), obj)
					return w.written(key, c.SubResource(sub).Update(ctx, obj, opts...))
				},
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
					key := w.add(c.(client.WithWatch), obj)
					return w.written(key, c.SubResource(sub).Patch(ctx, obj, p, opts...))
				},
				SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
					key := w.addApplied(obj)
					return w.written(key, c.SubResource(sub).Apply(ctx, obj, opts...))
				},
			}), nil
		},
	})
	if err != nil {
		return nil, errors.Wrap(err, "cannot create the bridge's manager")
	}
	if o.Concurrency == 0 {
		o.Concurrency = 2
	}
	o.Webhook = webhookClient
	if err := controllers.Setup(mgr, o); err != nil {
		return nil, err
	}
	m, err := start(ctx, "bridge", mgr, w)
	if m != nil {
		m.Logs = logs
	}
	return m, err
}

// Logs are a manager's log lines.
type Logs struct {
	mu    sync.Mutex
	lines []string
	echo  bool
}

func (l *Logs) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
	if l.echo {
		fmt.Fprintln(os.Stderr, prefix, args)
	}
}

// verbosity is what CAPXP_TEST_LOGS (or CAPXP_BENCH_LOGS) asks for, whose
// lines are then printed as well as kept; 0 and kept only otherwise.
func (l *Logs) verbosity() int {
	for _, name := range []string{"CAPXP_TEST_LOGS", "CAPXP_BENCH_LOGS"} {
		if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
			l.echo = true
			return v
		}
	}
	return 0
}

// WriteFile writes the lines kept to path, one per line.
func (l *Logs) WriteFile(path string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return os.WriteFile(path, []byte(strings.Join(l.lines, "\n")+"\n"), 0o600)
}

// Containing returns the lines that contain every one of the strings.
func (l *Logs) Containing(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

// startProvider runs the integration tests' Provider in a manager of its
// own: another process, whose writes are not the bridge's.
func (e *Environment) startProvider(ctx context.Context, delay time.Duration) (*Manager, error) {
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 controllers.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// controller-runtime v0.24's priority queue can keep a controller
		// from stopping (see the bridge's controller options).
		Controller: config.Controller{UsePriorityQueue: ptr.To(false)},
	})
	if err != nil {
		return nil, errors.Wrap(err, "cannot create the test provider's manager")
	}
	if err := (&Provider{Client: mgr.GetClient(), Delay: delay}).SetupWithManager(mgr); err != nil {
		return nil, errors.Wrap(err, "cannot set up the test provider")
	}
	return start(ctx, "test-provider", mgr, &Writes{counts: map[string]int{}, conflicts: map[string]int{}})
}

// start runs a manager; its goroutines carry the profiler label
// component=NAME, so that a CPU profile of a test tells the bridge's work
// from CAPI's and the test provider's (go tool pprof -tagfocus).
func start(ctx context.Context, name string, mgr ctrl.Manager, w *Writes) (*Manager, error) {
	mctx, cancel := context.WithCancel(ctx)
	m := &Manager{Manager: mgr, Writes: w, name: name, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		pprof.Do(mctx, pprof.Labels("component", name), func(ctx context.Context) { m.err = mgr.Start(ctx) })
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		_ = m.Stop()
		return nil, errors.New("the manager's cache did not sync")
	}
	return m, nil
}

// ControllerLogs sends the controllers' logs to klog at the verbosity the
// environment variable env names (4 shows the chatty lines too), or
// discards them when it is unset: they are noise in a passing run.
func ControllerLogs(env string) {
	v := os.Getenv(env)
	if v == "" {
		ctrl.SetLogger(logr.Discard())
		return
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", v)
	ctrl.SetLogger(klog.Background())
}
