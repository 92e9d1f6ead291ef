package xr

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/xrd"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/access"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/composed"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/contracts"
)

// Controllers runs one controller per adapted XRD. Controllers are started and
// stopped at run time, as XRDs come and go, on the manager's shared cache.
type Controllers struct {
	mgr         manager.Manager
	options     controller.Options
	filter      string
	credentials credentials.Resolver
	// crdLabels is shared by every kind's XRs, which compose the same
	// kinds.
	crdLabels crdLabels
	// access is what the bridge may read, shared by every kind.
	access *access.Reads
	// waiting is the XRs CAPI waits for, of every kind, exported as
	// capxp_xrs_waiting.
	waiting *waitingXRs

	mu      sync.Mutex
	base    context.Context  //nolint:containedctx // the manager's context, handed to Start.
	running map[string]*kind // by XRD name
	started chan struct{}
	// adapted holds the GroupKinds of the running controllers' XRs, read
	// without mu (a reconcile asks while Stop holds mu and waits for it).
	adapted sync.Map
}

// isAdapted reports whether a controller runs for the kind's XRs: an XR of
// such a kind is held and released by its own reconcile, never by another
// XR's.
func (k *Controllers) isAdapted(gk schema.GroupKind) bool {
	_, ok := k.adapted.Load(gk)
	return ok
}

type kind struct {
	adaptation xrd.Adaptation
	cancel     context.CancelFunc
	done       chan struct{}
}

// NewControllers returns a Controllers to add to the manager. watchFilter is CAPI's
// --watch-filter label value; empty watches everything.
func NewControllers(mgr manager.Manager, o controller.Options, watchFilter string, creds credentials.Resolver, access *access.Reads) (*Controllers, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, errors.Wrap(err, "cannot create a discovery client")
	}
	k := &Controllers{mgr: mgr, options: o, filter: watchFilter, credentials: creds, access: access,
		running: map[string]*kind{}, started: make(chan struct{}), waiting: newWaitingXRs(time.Now)}
	if err := registerWaiting(k.waiting); err != nil {
		return nil, err
	}
	k.crdLabels.categories = func(gv schema.GroupVersion) (map[string][]string, error) {
		l, err := disc.ServerResourcesForGroupVersion(gv.String())
		if err != nil {
			return nil, errors.Wrapf(err, "cannot discover the kinds of %s", gv)
		}
		out := map[string][]string{}
		for i := range l.APIResources {
			if r := &l.APIResources[i]; !strings.Contains(r.Name, "/") {
				out[r.Kind] = r.Categories
			}
		}
		return out, nil
	}
	return k, nil
}

// Start implements manager.Runnable: controllers start once the manager has.
func (k *Controllers) Start(ctx context.Context) error {
	k.mu.Lock()
	k.base = ctx
	close(k.started)
	k.mu.Unlock()
	<-ctx.Done()
	k.mu.Lock()
	defer k.mu.Unlock()
	for name := range k.running {
		k.stopLocked(name)
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (k *Controllers) NeedLeaderElection() bool { return true }

// Ensure runs a controller for an adapted XRD, once; a changed kind, version
// or contract replaces the running one.
func (k *Controllers) Ensure(ctx context.Context, name string, a xrd.Adaptation) error {
	select {
	case <-k.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if r, ok := k.running[name]; ok && r.adaptation == a {
		return nil
	}
	k.stopLocked(name)

	log := k.mgr.GetLogger().WithValues("controller", controllerName(a.GVK), "contract", a.Contract)
	opts := k.options
	opts.SkipNameValidation = ptr.To(true)
	opts.LogConstructor = func(req *ctrl.Request) logr.Logger {
		if req == nil {
			return log
		}
		return log.WithValues(a.GVK.Kind, req.String())
	}
	tracker := &external.ObjectTracker{Cache: k.mgr.GetCache(), Scheme: k.mgr.GetScheme(), PredicateLogger: &log}
	sm, err := contracts.New(a.Contract, contracts.Options{Client: k.mgr.GetClient(), Missing: k.access.Missing, KubeconfigWritten: func(kind string) {
		writes.WithLabelValues(targetKubeconfig, kind).Inc()
	}})
	if err != nil {
		return err
	}
	scheme := k.mgr.GetScheme()
	counting := countingTracker{watcher: tracker, scheme: scheme, kind: a.GVK.Kind}
	r := &xrReconciler{
		client: k.mgr.GetClient(), gvk: a.GVK, contract: sm, tracker: counting, credentials: k.credentials,
		recorder: k.mgr.GetEventRecorder(controllerName(a.GVK)), access: k.access, waiting: k.waiting,
		composed: composed.New(k.mgr.GetClient(), a.GVK, counting, k.access.Missing, crdLabeller{client: k.mgr.GetClient(), labels: &k.crdLabels},
			composed.WithAdapted(k.isAdapted)),
	}
	opts.Reconciler = r
	c, err := controller.NewUnmanaged(controllerName(a.GVK), opts)
	if err != nil {
		return errors.Wrap(err, "cannot create controller")
	}
	tracker.Controller = c

	xr := &unstructured.Unstructured{}
	xr.SetGroupVersionKind(a.GVK)
	// CAPI's watch filter selects the XRs and CAPI objects of one
	// management domain; grants and namespaces carry no such label, so it
	// never applies to them.
	filter := predicates.ResourceHasFilterLabel(k.mgr.GetScheme(), log, k.filter)
	if err := indexXRs(ctx, k.mgr.GetFieldIndexer(), xr); err != nil {
		return err
	}
	if err := c.Watch(source.Kind[client.Object](k.mgr.GetCache(), xr, counted(scheme, a.GVK.Kind, xr, &handler.EnqueueRequestForObject{}), filter, predicate.Funcs{UpdateFunc: r.xrChanged, DeleteFunc: r.xrDeleted})); err != nil {
		return errors.Wrap(err, "cannot watch composite resources")
	}
	env := contracts.WatchEnv{Ctx: k.base, Client: k.mgr.GetClient(), Scheme: scheme, Log: k.mgr.GetLogger()}
	for _, w := range sm.Watches(env, a.GVK, xr) {
		w.Predicates = append(w.Predicates, filter)
		if err := c.Watch(source.Kind[client.Object](k.mgr.GetCache(), w.Object, counted(scheme, a.GVK.Kind, w.Object, handler.EnqueueRequestsFromMapFunc(w.Map)), w.Predicates...)); err != nil {
			return errors.Wrapf(err, "cannot watch %T", w.Object)
		}
	}
	for _, w := range k.credentialWatches(a.GVK) {
		if err := c.Watch(source.Kind[client.Object](k.mgr.GetCache(), w.Object, counted(scheme, a.GVK.Kind, w.Object, handler.EnqueueRequestsFromMapFunc(w.Map)))); err != nil {
			return errors.Wrapf(err, "cannot watch %T", w.Object)
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
	k.running[name] = &kind{adaptation: a, cancel: cancel, done: done}
	k.adapted.Store(a.GVK.GroupKind(), true)
	log.Info("Adapted composite resource kind", "gvk", a.GVK.String())
	return nil
}

// Stop stops the controller of an XRD, if one runs.
func (k *Controllers) Stop(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopLocked(name)
}

func (k *Controllers) stopLocked(name string) {
	r, ok := k.running[name]
	if !ok {
		return
	}
	r.cancel()
	<-r.done
	delete(k.running, name)
	k.adapted.Delete(r.adaptation.GVK.GroupKind())
	xr := &unstructured.Unstructured{}
	xr.SetGroupVersionKind(r.adaptation.GVK)
	_ = k.mgr.GetCache().RemoveInformer(k.base, xr)
	k.waiting.forgetKind(r.adaptation.GVK.Kind)
	k.mgr.GetLogger().Info("Stopped adapting composite resource kind", "gvk", r.adaptation.GVK.String())
}

func controllerName(gvk schema.GroupVersionKind) string {
	return fmt.Sprintf("capxp-%s.%s", strings.ToLower(gvk.Kind), gvk.Group)
}

// credentialWatches wake the XRs whose use of shared credentials a grant
// given or revoked, or a namespace relabelled, changes: a grant of a config
// those that name a cluster-scoped config of its group and name, a grant of
// an ambient source every XR naming credentials of its group (a namespaced
// ProviderConfig may use the source), a namespace every XR in it that names
// credentials.
func (k *Controllers) credentialWatches(gvk schema.GroupVersionKind) []contracts.Watch {
	c := k.mgr.GetClient()
	return []contracts.Watch{
		{Object: &infrav1.ClusterProviderConfigGrant{}, Map: func(ctx context.Context, o client.Object) []reconcile.Request {
			g, ok := o.(*infrav1.ClusterProviderConfigGrant)
			if !ok {
				return nil
			}
			switch {
			case g.Spec.ProviderConfigRef != nil:
				return referencing(ctx, c, gvk, "", refName(g.Spec.ProviderConfigRef.APIGroup, g.Spec.ProviderConfigRef.Name))
			case g.Spec.CredentialSource != nil:
				return referencing(ctx, c, gvk, "", refGroup(g.Spec.CredentialSource.APIGroup))
			}
			return nil
		}},
		{Object: &corev1.Namespace{}, Map: func(ctx context.Context, o client.Object) []reconcile.Request {
			return referencing(ctx, c, gvk, o.GetName(), refAny)
		}},
	}
}

// composedKindsTimeout bounds ComposedKinds' reading of the cache.
const composedKindsTimeout = time.Second

// ComposedKinds returns the kinds of what the namespace's XRs of the
// adapted kinds compose (their spec.crossplane.resourceRefs), read from the
// manager's cache: no request reaches the API server. A revocation lists
// these kinds first.
//
// It never waits: not for the lock that starting and stopping a kind's
// controller holds (then it returns an error, and the revocation lists in
// its own order), nor longer than composedKindsTimeout for a cache that has
// not synced. What it found before an error is returned with it.
func (k *Controllers) ComposedKinds(ctx context.Context, ns string) (map[schema.GroupKind]bool, error) {
	// Held while listing, so that no kind stopped meanwhile has its
	// informer started again by the list.
	if !k.mu.TryLock() {
		return nil, errors.New("a kind's controller is starting or stopping")
	}
	defer k.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, composedKindsTimeout)
	defer cancel()
	out := map[schema.GroupKind]bool{}
	for _, r := range k.running {
		select {
		case <-r.done:
			// Its controller stopped (its cache never synced): nothing to
			// read.
			continue
		default:
		}
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(r.adaptation.GVK.GroupVersion().WithKind(r.adaptation.GVK.Kind + "List"))
		if err := k.mgr.GetCache().List(ctx, l, client.InNamespace(ns)); err != nil {
			return out, errors.Wrapf(err, "cannot list %s from the cache", r.adaptation.GVK.Kind)
		}
		for i := range l.Items {
			refs, _, _ := unstructured.NestedSlice(l.Items[i].Object, "spec", "crossplane", "resourceRefs")
			for _, ref := range refs {
				m, ok := ref.(map[string]any)
				if !ok {
					continue
				}
				apiVersion, _ := m["apiVersion"].(string)
				kind, _ := m["kind"].(string)
				if kind != "" {
					out[schema.FromAPIVersionAndKind(apiVersion, kind).GroupKind()] = true
				}
			}
		}
	}
	return out, nil
}
