package localkube

import (
	"context"
	"fmt"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/reconcilers/kubeadmconfig"
	kubeadmbootstrapsetup "sigs.k8s.io/cluster-api/bootstrap/kubeadm/setup"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/reconcilers/kubeadmcontrolplane"
	kubeadmcontrolplanesetup "sigs.k8s.io/cluster-api/controlplane/kubeadm/setup"
	"sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterclass"
	"sigs.k8s.io/cluster-api/core/reconcilers/machine"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinehealthcheck"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinepool"
	"sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	topologycluster "sigs.k8s.io/cluster-api/core/reconcilers/topology/cluster"
	topologymachinedeployment "sigs.k8s.io/cluster-api/core/reconcilers/topology/machinedeployment"
	topologymachineset "sigs.k8s.io/cluster-api/core/reconcilers/topology/machineset"
	"sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/feature"
	"sigs.k8s.io/cluster-api/util/index"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

var capiManagers atomic.Int64

// CAPI is CAPI's core controller manager, and those of the providers the
// options add, running in-process against an API server.
type CAPI struct {
	// Manager is CAPI's core manager, or the first provider's without
	// the core controllers.
	Manager ctrl.Manager

	cancel    context.CancelFunc
	shutdowns []func()
	sources   context.Context //nolint:containedctx // outlives the managers' contexts by design.
	done      sync.WaitGroup
	mu        sync.Mutex
	err       error
}

// CAPIOption adds controllers to the ones StartCAPI runs.
type CAPIOption func(*capiOptions)

type capiOptions struct {
	topology, kubeadm, noCore bool
	// noKubeadmControlPlane leaves KubeadmControlPlane's reconciler to a
	// process of its own (WithKubeadmBootstrap).
	noKubeadmControlPlane bool
	gates                 []string
}

// WithClusterTopology enables CAPI's ClusterTopology feature gate (for the
// whole process) and runs the ClusterClass and managed topology reconcilers.
func WithClusterTopology() CAPIOption { return func(o *capiOptions) { o.topology = true } }

// WithFeatureGates enables CAPI feature gates by name (for the whole
// process), as clusterctl's EXP_* variables do for a provider's manager:
// for example MachineTaintPropagation, which CAPI's own e2e specs of
// rollouts turn on.
func WithFeatureGates(gates ...string) CAPIOption {
	return func(o *capiOptions) { o.gates = append(o.gates, gates...) }
}

// WithoutCore runs none of CAPI's core controllers (nor the topology
// ones): only the providers the other options add, for a CAPI core
// controller that runs as a process of its own.
func WithoutCore() CAPIOption { return func(o *capiOptions) { o.noCore = true } }

// WithKubeadm runs the kubeadm bootstrap (KubeadmConfig) and control plane
// (KubeadmControlPlane) providers, each in a manager of its own as each
// runs in a Deployment of its own; their CRDs must be installed.
func WithKubeadm() CAPIOption { return func(o *capiOptions) { o.kubeadm = true } }

// WithKubeadmBootstrap runs the kubeadm bootstrap provider (KubeadmConfig)
// alone, for a KubeadmControlPlane controller that runs as a process of its
// own; the kubeadm CRDs must be installed.
func WithKubeadmBootstrap() CAPIOption {
	return func(o *capiOptions) { o.kubeadm, o.noKubeadmControlPlane = true, true }
}

// cacheOptions are a provider's manager cache options (setup's
// ManagerCacheOptions of each).
type cacheOptions func(scheme *runtime.Scheme, name, namespace string, sync time.Duration) ctrlcache.Options

// provider is one of the managers StartCAPI starts: its name, its setup
// package's options, and what it runs.
type provider struct {
	name         string
	cache        cacheOptions
	client       client.Options
	clusterCache clustercache.CacheOptions
	setup        func(ctx context.Context, mgr ctrl.Manager, cc clustercache.ClusterCache, secrets client.Client) error
}

// StartCAPI starts a manager running CAPI's real Cluster, Machine,
// MachineSet, MachineDeployment and MachineHealthCheck reconcilers (with
// their ClusterCache and indexes), and those the options add, configured as
// CAPI's own mains configure them.
func (e *Environment) StartCAPI(ctx context.Context, opts ...CAPIOption) (*CAPI, error) {
	var o capiOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.topology {
		o.gates = append(o.gates, string(feature.ClusterTopology))
	}
	for _, g := range o.gates {
		if err := feature.MutableGates.Set(g + "=true"); err != nil {
			return nil, errors.Wrapf(err, "cannot enable CAPI's %s feature gate", g)
		}
	}
	var providers []provider
	switch {
	case !o.noCore:
		providers = append(providers, provider{name: "capi-controller-manager", cache: setup.ManagerCacheOptions, client: setup.ManagerClientOptions(), clusterCache: setup.ClusterCacheCacheOptions(),
			setup: func(ctx context.Context, mgr ctrl.Manager, cc clustercache.ClusterCache, _ client.Client) error {
				if err := setupCore(ctx, mgr, cc); err != nil {
					return err
				}
				if o.topology {
					return setupTopology(ctx, mgr, cc)
				}
				return nil
			}})
	case o.topology:
		return nil, errors.New("CAPI's topology controllers run with its core controllers")
	case !o.kubeadm:
		return nil, errors.New("no CAPI controller to run")
	}
	if o.kubeadm {
		providers = append(providers,
			provider{name: "capi-kubeadm-bootstrap-manager", cache: kubeadmbootstrapsetup.ManagerCacheOptions, client: kubeadmbootstrapsetup.ManagerClientOptions(),
				clusterCache: kubeadmbootstrapsetup.ClusterCacheCacheOptions(), setup: setupKubeadmBootstrap})
	}
	if o.kubeadm && !o.noKubeadmControlPlane {
		providers = append(providers,
			provider{name: "capi-kubeadm-control-plane-manager", cache: kubeadmcontrolplanesetup.ManagerCacheOptions, client: kubeadmcontrolplanesetup.ManagerClientOptions(),
				clusterCache: kubeadmcontrolplanesetup.ClusterCacheCacheOptions(), setup: setupKubeadmControlPlane})
	}

	c := &CAPI{}
	// The ClusterCaches' cluster sources are read until the managers have
	// stopped (drainedClusterCache).
	var stopSources context.CancelFunc
	c.sources, stopSources = context.WithCancel(context.WithoutCancel(ctx))
	c.shutdowns = append(c.shutdowns, stopSources)
	// ctx bounds the start; the controllers run until Stop, however long
	// the caller's start deadline was.
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	for i := range providers {
		mgr, err := e.startProvider(ctx, mctx, c, &providers[i])
		if err != nil {
			_ = c.Stop()
			return nil, err
		}
		if i == 0 {
			c.Manager = mgr
		}
	}
	return c, nil
}

// startProvider creates one provider's manager, sets it up and starts it.
func (e *Environment) startProvider(ctx, mctx context.Context, c *CAPI, pr *provider) (ctrl.Manager, error) {
	// CAPI names its informers after the manager, process-wide: each manager
	// started in one process (a test binary) needs its own name.
	name := fmt.Sprintf("%s-%d", pr.name, capiManagers.Add(1))
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// In-flight reconciles finish slowly on a loaded machine.
		GracefulShutdownTimeout: ptr.To(2 * time.Minute),
		Cache:                   pr.cache(e.Scheme, name, "", 10*time.Minute),
		Client:                  pr.client,
		Controller:              ctrlConfig(),
	})
	if err != nil {
		return nil, errors.Wrapf(err, "cannot create %s", pr.name)
	}
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return nil, errors.Wrapf(err, "cannot add the indexes of %s", pr.name)
	}
	secrets, err := setup.CreateSecretCachingClient(mgr)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot create the secret caching client of %s", pr.name)
	}
	cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secrets,
		Cache:        pr.clusterCache,
		Client:       setup.ClusterCacheClientOptions(name, 20, 30),
	}, controller.Options{MaxConcurrentReconciles: 2})
	if err != nil {
		return nil, errors.Wrapf(err, "cannot set up the ClusterCache of %s", pr.name)
	}
	// The ClusterCache's connections to workload clusters outlive the
	// manager until shut down, and would keep those API servers from
	// stopping.
	c.shutdowns = append(c.shutdowns, cc.(interface{ Shutdown() }).Shutdown)
	if err := pr.setup(ctx, mgr, drainedClusterCache{ClusterCache: cc, sources: c.sources}, secrets); err != nil {
		return nil, err
	}
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		var err error
		// Labelled, so that a stuck shutdown can say what it waits on.
		pprof.Do(mctx, pprof.Labels("component", pr.name), func(ctx context.Context) { err = mgr.Start(ctx) })
		if err != nil {
			c.mu.Lock()
			c.err = errors.Join(c.err, errors.Wrapf(err, "%s", pr.name))
			c.mu.Unlock()
		}
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil, errors.Errorf("the cache of %s did not sync", pr.name)
	}
	return mgr, nil
}

// setupCore sets up CAPI's Cluster, Machine, MachineSet, MachineDeployment,
// MachinePool and MachineHealthCheck reconcilers.
func setupCore(ctx context.Context, mgr ctrl.Manager, cc clustercache.ClusterCache) error {
	if err := (&cluster.Reconciler{
		Client:                      mgr.GetClient(),
		APIReader:                   mgr.GetAPIReader(),
		ClusterCache:                cc,
		RemoteConnectionGracePeriod: 50 * time.Second,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return errors.Wrap(err, "cannot set up CAPI's Cluster reconciler")
	}
	if err := (&machine.Reconciler{
		Client:                      mgr.GetClient(),
		APIReader:                   mgr.GetAPIReader(),
		ClusterCache:                cc,
		RemoteConditionsGracePeriod: 5 * time.Minute,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return errors.Wrap(err, "cannot set up CAPI's Machine reconciler")
	}
	if err := (&machineset.Reconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		ClusterCache: cc,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return errors.Wrap(err, "cannot set up CAPI's MachineSet reconciler")
	}
	if err := (&machinedeployment.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return errors.Wrap(err, "cannot set up CAPI's MachineDeployment reconciler")
	}
	if err := (&machinepool.Reconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		ClusterCache: cc,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return errors.Wrap(err, "cannot set up CAPI's MachinePool reconciler")
	}
	if err := (&machinehealthcheck.Reconciler{
		Client:       mgr.GetClient(),
		ClusterCache: cc,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return errors.Wrap(err, "cannot set up CAPI's MachineHealthCheck reconciler")
	}
	return nil
}

// setupTopology sets up the ClusterClass reconciler and the managed
// topology reconcilers of Clusters, MachineDeployments and MachineSets.
func setupTopology(ctx context.Context, mgr ctrl.Manager, cc clustercache.ClusterCache) error {
	if err := (&clusterclass.Reconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return errors.Wrap(err, "cannot set up CAPI's ClusterClass reconciler")
	}
	if err := (&topologycluster.Reconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		ClusterCache: cc,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return errors.Wrap(err, "cannot set up CAPI's ClusterTopology reconciler")
	}
	if err := (&topologymachinedeployment.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return errors.Wrap(err, "cannot set up CAPI's MachineDeploymentTopology reconciler")
	}
	if err := (&topologymachineset.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return errors.Wrap(err, "cannot set up CAPI's MachineSetTopology reconciler")
	}
	return nil
}

// setupKubeadmBootstrap sets up the kubeadm bootstrap provider's
// KubeadmConfig reconciler, as its main does.
func setupKubeadmBootstrap(ctx context.Context, mgr ctrl.Manager, cc clustercache.ClusterCache, secrets client.Client) error {
	err := (&kubeadmconfig.Reconciler{
		Client:              mgr.GetClient(),
		SecretCachingClient: secrets,
		APIReader:           mgr.GetAPIReader(),
		ClusterCache:        cc,
		TokenTTL:            15 * time.Minute,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2})
	return errors.Wrap(err, "cannot set up the KubeadmConfig reconciler")
}

// setupKubeadmControlPlane sets up the kubeadm control plane provider's
// KubeadmControlPlane reconciler, as its main does.
func setupKubeadmControlPlane(ctx context.Context, mgr ctrl.Manager, cc clustercache.ClusterCache, secrets client.Client) error {
	err := (&kubeadmcontrolplane.Reconciler{
		Client:                      mgr.GetClient(),
		APIReader:                   mgr.GetAPIReader(),
		SecretCachingClient:         secrets,
		ClusterCache:                cc,
		EtcdDialTimeout:             10 * time.Second,
		EtcdCallTimeout:             15 * time.Second,
		EtcdLogger:                  zap.NewNop(),
		RemoteConditionsGracePeriod: 5 * time.Minute,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2, ReconciliationTimeout: 3 * time.Minute})
	return errors.Wrap(err, "cannot set up the KubeadmControlPlane reconciler")
}

// ctrlConfig lets each test start its own managers in one test binary.
//
// CAPI's mains use controller-runtime's priority queue (its PriorityQueue
// feature gate, on by default); here every manager uses client-go's work
// queue, because controller-runtime v0.24's priority queue can keep a
// controller from stopping (controllers.controllerOptions says how), and
// these managers are stopped after every test.
func ctrlConfig() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true), UsePriorityQueue: ptr.To(false)}
}

// Stop stops the managers and waits for them; it returns their errors.
func (c *CAPI) Stop() error {
	c.cancel()
	c.done.Wait()
	for _, shutdown := range c.shutdowns {
		shutdown()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ShutdownStuck(c.err) {
		return fmt.Errorf("%w (goroutines in %s); those of capi-controller-manager:\n%s", c.err, DumpGoroutines("capi"), Goroutines("capi-controller-manager"))
	}
	return c.err
}

// drainedClusterCache works around a shutdown deadlock in CAPI's
// ClusterCache (v1.14.2): its own controller's reconcile sends Cluster
// events to the controllers that took a cluster source, over an unbuffered
// channel, while it holds the lock every other send takes. A manager stops
// its controllers together; a receiving controller that stopped first
// stops reading, the ClusterCache's reconcile blocks on the send for good,
// and the manager outlives its graceful shutdown period (integration tests
// saw it stopping CAPI's manager right after deleting a Cluster). Here the
// cluster sources are read until every manager StartCAPI started has
// stopped; an event read after its controller stopped goes to a queue
// already shut down, which drops it.
type drainedClusterCache struct {
	clustercache.ClusterCache
	sources context.Context //nolint:containedctx // outlives the managers' contexts by design.
}

// GetClusterSource returns the ClusterCache's source, started with a
// context that outlives its controller's.
func (d drainedClusterCache) GetClusterSource(controllerName string, mapFunc func(ctx context.Context, cluster client.Object) []ctrl.Request, opts ...clustercache.GetClusterSourceOption) source.Source {
	return drainedSource{Source: d.ClusterCache.GetClusterSource(controllerName, mapFunc, opts...), ctx: d.sources}
}

type drainedSource struct {
	source.Source
	ctx context.Context //nolint:containedctx // outlives the controller's context by design.
}

// Start starts the source with the drained context rather than its
// controller's.
func (s drainedSource) Start(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	return s.Source.Start(s.ctx, q)
}
