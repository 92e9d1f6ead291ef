package localkube

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	"sigs.k8s.io/cluster-api/core/reconcilers/machine"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	"sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	"sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/util/index"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

var capiManagers atomic.Int64

// CAPI is CAPI's core controller manager running in-process against an API
// server.
type CAPI struct {
	Manager ctrl.Manager

	cancel   context.CancelFunc
	shutdown func()
	done     sync.WaitGroup
	err      error
}

// StartCAPI starts a manager running CAPI's real Cluster, Machine, MachineSet
// and MachineDeployment reconcilers (with their ClusterCache and indexes),
// configured as CAPI's own main configures them.
func (e *Environment) StartCAPI(ctx context.Context) (*CAPI, error) {
	// CAPI names its informers after the manager, process-wide: each manager
	// started in one process (a test binary) needs its own name.
	name := fmt.Sprintf("capi-controller-manager-%d", capiManagers.Add(1))
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// In-flight reconciles finish slowly on a loaded machine.
		GracefulShutdownTimeout: ptr.To(2 * time.Minute),
		Cache:                   setup.ManagerCacheOptions(e.Scheme, name, "", 10*time.Minute),
		Client:                  setup.ManagerClientOptions(),
		Controller:              ctrlConfig(),
	})
	if err != nil {
		return nil, errors.Wrap(err, "cannot create CAPI's manager")
	}
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return nil, errors.Wrap(err, "cannot add CAPI's indexes")
	}
	secrets, err := setup.CreateSecretCachingClient(mgr)
	if err != nil {
		return nil, errors.Wrap(err, "cannot create CAPI's secret caching client")
	}
	cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secrets,
		Cache:        setup.ClusterCacheCacheOptions(),
		Client:       setup.ClusterCacheClientOptions(name, 20, 30),
	}, controller.Options{MaxConcurrentReconciles: 2})
	if err != nil {
		return nil, errors.Wrap(err, "cannot set up CAPI's ClusterCache")
	}
	if err := (&cluster.Reconciler{
		Client:                      mgr.GetClient(),
		APIReader:                   mgr.GetAPIReader(),
		ClusterCache:                cc,
		RemoteConnectionGracePeriod: 50 * time.Second,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return nil, errors.Wrap(err, "cannot set up CAPI's Cluster reconciler")
	}
	if err := (&machine.Reconciler{
		Client:                      mgr.GetClient(),
		APIReader:                   mgr.GetAPIReader(),
		ClusterCache:                cc,
		RemoteConditionsGracePeriod: 5 * time.Minute,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return nil, errors.Wrap(err, "cannot set up CAPI's Machine reconciler")
	}
	if err := (&machineset.Reconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		ClusterCache: cc,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return nil, errors.Wrap(err, "cannot set up CAPI's MachineSet reconciler")
	}
	if err := (&machinedeployment.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return nil, errors.Wrap(err, "cannot set up CAPI's MachineDeployment reconciler")
	}

	c := &CAPI{Manager: mgr, shutdown: cc.(interface{ Shutdown() }).Shutdown}
	mctx, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		c.err = mgr.Start(mctx)
	}()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		_ = c.Stop()
		return nil, errors.New("CAPI's manager cache did not sync")
	}
	return c, nil
}

// ctrlConfig lets each test start its own managers in one test binary.
func ctrlConfig() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true)}
}

// Stop stops the manager and waits for it; it returns the manager's error.
func (c *CAPI) Stop() error {
	c.cancel()
	c.done.Wait()
	// The ClusterCache's connections to workload clusters outlive the
	// manager until shut down, and would keep those API servers from
	// stopping.
	c.shutdown()
	return c.err
}
