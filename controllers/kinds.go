package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/xrd"
)

// Kinds runs one controller per adapted XR kind. Controllers are started and
// stopped at run time, as XRDs come and go, on the manager's shared cache.
type Kinds struct {
	mgr         manager.Manager
	options     controller.Options
	filter      string
	credentials credentials.Resolver

	mu      sync.Mutex
	base    context.Context //nolint:containedctx // the manager's context, handed to Start.
	running map[schema.GroupVersionKind]*kind
	started chan struct{}
}

type kind struct {
	contract string
	cancel   context.CancelFunc
	done     chan struct{}
}

// NewKinds returns a Kinds to add to the manager. watchFilter is CAPI's
// --watch-filter label value; empty watches everything.
func NewKinds(mgr manager.Manager, o controller.Options, watchFilter string, creds credentials.Resolver) *Kinds {
	return &Kinds{mgr: mgr, options: o, filter: watchFilter, credentials: creds, running: map[schema.GroupVersionKind]*kind{}, started: make(chan struct{})}
}

// Start implements manager.Runnable: controllers start once the manager has.
func (k *Kinds) Start(ctx context.Context) error {
	k.mu.Lock()
	k.base = ctx
	close(k.started)
	k.mu.Unlock()
	<-ctx.Done()
	k.mu.Lock()
	defer k.mu.Unlock()
	for gvk, r := range k.running {
		r.cancel()
		<-r.done
		delete(k.running, gvk)
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (k *Kinds) NeedLeaderElection() bool { return true }

// Ensure runs a controller for an adapted kind, once.
func (k *Kinds) Ensure(ctx context.Context, a xrd.Adaptation) error {
	select {
	case <-k.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if r, ok := k.running[a.GVK]; ok && r.contract == a.Contract {
		return nil
	}
	k.stopLocked(a.GVK)

	log := k.mgr.GetLogger().WithValues("controller", controllerName(a.GVK), "contract", a.Contract)
	opts := k.options
	opts.SkipNameValidation = ptr.To(true)
	opts.LogConstructor = func(req *ctrl.Request) logr.Logger {
		if req == nil {
			return log
		}
		return log.WithValues(a.GVK.Kind, req.NamespacedName.String())
	}
	tracker := &external.ObjectTracker{Cache: k.mgr.GetCache(), Scheme: k.mgr.GetScheme(), PredicateLogger: &log}
	rec := k.mgr.GetEventRecorderFor(controllerName(a.GVK))
	switch a.Contract {
	case infrav1.ContractInfraCluster:
		opts.Reconciler = NewInfraClusterReconciler(k.mgr.GetClient(), a.GVK, rec, tracker, k.credentials)
	case infrav1.ContractInfraMachine:
		opts.Reconciler = NewInfraMachineReconciler(k.mgr.GetClient(), a.GVK, rec, tracker, k.credentials)
	default:
		return errors.Errorf("unknown contract %s", a.Contract)
	}
	c, err := controller.NewUnmanaged(controllerName(a.GVK), opts)
	if err != nil {
		return errors.Wrap(err, "cannot create controller")
	}
	tracker.Controller = c

	xr := &unstructured.Unstructured{}
	xr.SetGroupVersionKind(a.GVK)
	filter := predicates.ResourceHasFilterLabel(k.mgr.GetScheme(), log, k.filter)
	if err := c.Watch(source.Kind[client.Object](k.mgr.GetCache(), xr, &handler.EnqueueRequestForObject{}, filter)); err != nil {
		return errors.Wrap(err, "cannot watch composite resources")
	}
	for _, w := range k.watches(a, xr) {
		if err := c.Watch(source.Kind[client.Object](k.mgr.GetCache(), w.obj, handler.EnqueueRequestsFromMapFunc(w.fn), filter)); err != nil {
			return errors.Wrapf(err, "cannot watch %T", w.obj)
		}
	}

	cctx, cancel := context.WithCancel(k.base)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Start(cctx); err != nil {
			log.Error(err, "Controller stopped")
		}
	}()
	k.running[a.GVK] = &kind{contract: a.Contract, cancel: cancel, done: done}
	log.Info("Adapted composite resource kind", "gvk", a.GVK.String())
	return nil
}

// Stop stops the controller of a kind, if one runs.
func (k *Kinds) Stop(gvk schema.GroupVersionKind) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopLocked(gvk)
}

func (k *Kinds) stopLocked(gvk schema.GroupVersionKind) {
	r, ok := k.running[gvk]
	if !ok {
		return
	}
	r.cancel()
	<-r.done
	delete(k.running, gvk)
	xr := &unstructured.Unstructured{}
	xr.SetGroupVersionKind(gvk)
	_ = k.mgr.GetCache().RemoveInformer(k.base, xr)
	k.mgr.GetLogger().Info("Stopped adapting composite resource kind", "gvk", gvk.String())
}

func controllerName(gvk schema.GroupVersionKind) string {
	return fmt.Sprintf("capxp-%s.%s", strings.ToLower(gvk.Kind), gvk.Group)
}

type watch struct {
	obj client.Object
	fn  handler.MapFunc
}

// watches are the CAPI objects whose changes concern an XR kind, beyond the
// XRs themselves.
func (k *Kinds) watches(a xrd.Adaptation, xr *unstructured.Unstructured) []watch {
	c := k.mgr.GetClient()
	refs := &xrBase{client: c, gvk: a.GVK}
	// A grant given or revoked, or a namespace relabelled, changes which
	// XRs may use shared credentials.
	creds := []watch{
		{&infrav1.ClusterProviderConfigGrant{}, func(ctx context.Context, o client.Object) []reconcile.Request {
			g, ok := o.(*infrav1.ClusterProviderConfigGrant)
			if !ok {
				return nil
			}
			return refs.referencing(ctx, "", func(r *infrav1.ProviderConfigReference) bool {
				return r.Kind == infrav1.ProviderConfigKindCluster && r.APIGroup == g.Spec.ProviderConfigRef.APIGroup && r.Name == g.Spec.ProviderConfigRef.Name
			})
		}},
		{&corev1.Namespace{}, func(ctx context.Context, o client.Object) []reconcile.Request {
			return refs.referencing(ctx, o.GetName(), func(r *infrav1.ProviderConfigReference) bool { return r.Kind == infrav1.ProviderConfigKindCluster })
		}},
	}
	switch a.Contract {
	case infrav1.ContractInfraCluster:
		return append(creds,
			// The Cluster's pause and ownership.
			watch{&clusterv1.Cluster{}, util.ClusterToInfrastructureMapFunc(k.base, a.GVK, c, xr)},
			// A deleting cluster XR waits for the cluster's Machines.
			watch{&clusterv1.Machine{}, machineToClusterInfrastructure(c, a.GVK)},
		)
	default:
		return append(creds,
			// The Machine's bootstrap data and failure domain.
			watch{&clusterv1.Machine{}, util.MachineToInfrastructureMapFunc(a.GVK)},
			// The Cluster's pause and infrastructure provisioning.
			watch{&clusterv1.Cluster{}, listByCluster(c, a.GVK)},
		)
	}
}

// machineToClusterInfrastructure maps a Machine to its Cluster's
// infrastructure XR, when that is of the given kind.
func machineToClusterInfrastructure(c client.Client, gvk schema.GroupVersionKind) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[clusterv1.ClusterNameLabel]
		if name == "" {
			return nil
		}
		cluster := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: name}, cluster); err != nil {
			return nil
		}
		ref := cluster.Spec.InfrastructureRef
		if ref.APIGroup != gvk.Group || ref.Kind != gvk.Kind {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}}}
	}
}
