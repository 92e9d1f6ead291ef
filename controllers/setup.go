package controllers

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/access"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/budget"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/caching"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/contracts"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/inplace"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/resolve"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/restmapper"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/tenancy"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/webhook"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/xr"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/xrd"
	"github.com/capxp/cluster-api-provider-crossplane/internal/hooks"
)

// Options configure the bridge's controllers.
type Options struct {
	// Concurrency is the number of XRs of one kind reconciled at once.
	Concurrency int
	// WatchFilter is CAPI's watch filter label value; empty means all.
	WatchFilter string
	// SharedCredentialsForAllNamespaces lets every namespace use every
	// ClusterProviderConfig without a grant: single-tenant clusters only.
	SharedCredentialsForAllNamespaces bool
	// CredentialsProviders are the providers whose managed resources are
	// admitted only with credentials their namespace may use; nil means
	// credentials.DefaultProviders (the shipped Compositions').
	CredentialsProviders []credentials.Provider
	// Webhook, when set, serves the credentials admission webhook on the
	// manager's webhook server and registers it for every adapted kind.
	Webhook *webhook.ClientConfig
	// InPlaceUpdates, with Webhook, serves CAPI's in-place update hooks on
	// the manager's webhook server and registers them with CAPI.
	InPlaceUpdates bool
}

// NewScheme returns the scheme the manager needs: the kinds the
// Contracts read are all it reads.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(contracts.AddToScheme(s))
	return s
}

// Reads of credentials Secrets have a rate limit of their own: a namespace
// with many XRs naming missing Secrets (each read again every
// credentials.RecheckSecretAfter) waits on this budget, not on the one
// every other tenant's holds and revocations use; within it, each
// namespace has its own (secretBudgets).
const (
	secretReadQPS   = 10
	secretReadBurst = 20
)

// rateLimited returns a client whose requests have a rate limit of their
// own, reading uncached or, when cached, from the manager's cache as the
// manager's client does; what names what it is for.
func rateLimited(mgr ctrl.Manager, qps float32, burst int, what string, cached bool) (client.Client, error) {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	o := client.Options{}
	if cached {
		o = caching.ClientOptions()
		o.Cache.Reader = mgr.GetCache()
	}
	o.Scheme, o.Mapper = mgr.GetScheme(), mgr.GetRESTMapper()
	c, err := client.New(cfg, o)
	return c, errors.Wrapf(err, "cannot build the client for %s", what)
}

// The records' writes (and the pauses of what a revocation reaches) have a
// rate limit of their own: a tenant whose XRs keep the manager's client
// busy does not delay another namespace's grant or revocation.
const (
	recordsWriteQPS   = 20
	recordsWriteBurst = 40
)

// Lists of managed resources (to pause what a revocation reaches, and to let
// a deleted namespace's record go) have a rate limit of their own: a
// namespace whose record changes often spends it, not the budget every
// tenant's holds and releases use.
const (
	managedListQPS   = 10
	managedListBurst = 40
)

// resolver reads credentials kinds only once access says the bridge may.
func resolver(mgr ctrl.Manager, o Options, reads *access.Reads, secrets client.Reader) *resolve.APIResolver {
	opts := []resolve.APIResolverOption{resolve.WithReadCheck(reads.Missing)}
	if o.SharedCredentialsForAllNamespaces {
		opts = append(opts, resolve.WithSharedCredentialsForAllNamespaces())
	}
	return resolve.NewAPIResolver(mgr.GetClient(), secrets, opts...)
}

// Setup adds the bridge's controllers to a manager.
func Setup(mgr ctrl.Manager, o Options) error {
	co := controllerOptions(max(o.Concurrency, 1))
	reads := access.NewReads(mgr.GetClient())
	secrets, err := rateLimited(mgr, secretReadQPS, secretReadBurst, "credentials Secrets", false)
	if err != nil {
		return err
	}
	if err := restmapper.ForgetOnCRDChanges(context.Background(), mgr); err != nil {
		return err
	}
	budgets := budget.NewBudgets()
	creds := resolver(mgr, o, reads, budget.FailFast{Reader: secrets, Budgets: budgets})
	kinds, err := xr.NewControllers(mgr, co, o.WatchFilter, creds, reads)
	if err != nil {
		return err
	}
	if err := mgr.Add(kinds); err != nil {
		return errors.Wrap(err, "cannot add the kind controllers")
	}
	if o.Webhook != nil {
		mgr.GetWebhookServer().Register(webhook.Path, &crwebhook.Admission{Handler: &webhook.CredentialsValidator{Granter: creds}})
	}
	if o.Webhook != nil && o.InPlaceUpdates {
		if err := inplace.Serve(mgr, hooks.NewExtension(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetRESTMapper())); err != nil {
			return err
		}
		if err := mgr.Add(inplace.NewRegistration(mgr.GetClient(), mgr.GetAPIReader(), o.Webhook)); err != nil {
			return errors.Wrap(err, "cannot add the in-place update extension's registration")
		}
	}
	providers := o.CredentialsProviders
	if providers == nil {
		providers = credentials.DefaultProviders
	}
	managed, err := rateLimited(mgr, managedListQPS, managedListBurst, "managed resources", false)
	if err != nil {
		return err
	}
	ropts := []tenancy.RecordsOption{
		tenancy.WithSecretReaders(budget.FailFast{Reader: secrets, Budgets: budgets}, secrets), tenancy.WithManagedReader(managed),
		tenancy.WithReadAccess(reads), tenancy.WithNetworks(networkKinds(providers)), tenancy.WithCacheTransform(caching.StripManagedFields),
		tenancy.WithComposedKinds(kinds.ComposedKinds),
	}
	if o.SharedCredentialsForAllNamespaces {
		ropts = append(ropts, tenancy.WithAllClusterConfigs())
	}
	recordsClient, err := rateLimited(mgr, recordsWriteQPS, recordsWriteBurst, "NamespaceCredentials", true)
	if err != nil {
		return err
	}
	records := tenancy.NewRecords(recordsClient, mgr.GetAPIReader(), providers, ropts...)
	if err := records.SetupWithManager(mgr, controllerOptions(max(o.Concurrency, 1))); err != nil {
		return err
	}
	policy := tenancy.NewPolicyController(mgr.GetClient(), mgr.GetAPIReader(), providers, networkUses(providers), func(ctx context.Context) ([]metav1.OwnerReference, error) {
		return webhook.Owners(ctx, mgr.GetClient(), o.Webhook)
	})
	if err := policy.SetupWithManager(mgr, controllerOptions(1)); err != nil {
		return err
	}
	own := xrd.NewOwnCRDs(mgr.GetClient(), o.Webhook)
	if err := own.SetupWithManager(mgr, controllerOptions(1)); err != nil {
		return errors.Wrap(err, "cannot set up the own CRDs controller")
	}
	xrds := xrd.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), kinds, mgr.GetEventRecorder("capxp-xrd"), o.Webhook)
	return errors.Wrap(xrds.SetupWithManager(mgr, controllerOptions(1)), "cannot set up the XRD controller")
}

// controllerOptions are every bridge controller's options: n workers, and
// client-go's work queue rather than controller-runtime's priority queue.
// controller-runtime v0.24's priority queue can hang a controller's stop for
// good: a worker waiting for an item returns when the queue shuts down
// without withdrawing itself, the queue's dispatcher may then send it an
// item nobody receives while holding the lock a finishing worker needs, and
// the controller waits for that worker forever (fixed in v0.25). The bridge
// stops kind controllers at run time, whenever an XRD is released or
// forbidden, under the lock every adaptation takes: one hung stop would end
// all adaptation, not just delay a shutdown. Integration tests caught it as
// a manager outliving its graceful shutdown.
func controllerOptions(n int) controller.Options {
	return controller.Options{MaxConcurrentReconciles: n, UsePriorityQueue: ptr.To(false)}
}

// networkKinds are the kinds whose managed resources report the networks a
// namespace owns: provider-upjet-aws's, when its managed resources are
// enforced.
func networkKinds(providers []credentials.Provider) []credentials.NetworkKind {
	if !enforcesAWS(providers) {
		return nil
	}
	return credentials.AWSNetworkKinds
}

// networkUses are the kinds whose network IDs are admitted only when their
// namespace owns them.
func networkUses(providers []credentials.Provider) []credentials.NetworkUse {
	if !enforcesAWS(providers) {
		return nil
	}
	return credentials.AWSNetworkUses
}

func enforcesAWS(providers []credentials.Provider) bool {
	for _, p := range providers {
		if p.Manages(credentials.AWSNetworkKinds[0].Group) {
			return true
		}
	}
	return false
}
