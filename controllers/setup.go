package controllers

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unique"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/access"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/budget"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/contracts"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/resolve"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/tenancy"
	"github.com/capxp/cluster-api-provider-crossplane/internal/leanjson"
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
	Webhook *WebhookClientConfig
}

// NewScheme returns the scheme the manager needs: the kinds the
// Contracts read are all it reads.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(contracts.AddToScheme(s))
	return s
}

// CacheOptions are the manager's cache options: managed fields
// stripped from everything cached, an optional watch namespace.
func CacheOptions(namespace string, syncPeriod time.Duration) cache.Options {
	o := cache.Options{
		DefaultTransform: stripManagedFields,
		ByObject: map[client.Object]cache.ByObject{
			&clusterv1.Machine{}: {Transform: slimMachine},
		},
		SyncPeriod: &syncPeriod,
	}
	if namespace != "" {
		o.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	return o
}

// NewCache is the manager's cache: cache.New, reading from the API server
// through an HTTP client that drops the managed fields of what it lists and
// watches before client-go decodes it (leanjson). stripManagedFields still
// drops them from what comes another way (protobuf, a server that sends
// them in another media type).
func NewCache(cfg *rest.Config, o cache.Options) (cache.Cache, error) {
	hc := o.HTTPClient
	if hc == nil {
		var err error
		if hc, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, errors.Wrap(err, "cannot create the cache's HTTP client")
		}
	}
	lean := *hc
	lean.Transport = leanjson.RoundTripper(hc.Transport)
	o.HTTPClient = &lean
	return cache.New(cfg, o)
}

// How long the REST mapper answers a lookup from memory, when no CRD
// changed since: a kind the API server did not serve, and one it served
// (whose mapping changes with its CRD, or with an aggregated API). A kind
// is served a moment after its CRD's last event (Established): a miss in
// that moment is remembered, so missTTL is short. maxAnswers bounds the
// memory, whose keys tenants choose (a credentials reference's kind).
const (
	missTTL    = 2 * time.Second
	hitTTL     = time.Minute
	maxAnswers = 4096
)

// NewRESTMapper is the manager's REST mapper: controller-runtime's dynamic
// one behind a memory of its answers (restMapper). Setup forgets them
// whenever a CRD changes.
func NewRESTMapper(cfg *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, errors.Wrap(err, "cannot build the discovery client")
	}
	return &restMapper{RESTMapper: m, answers: map[string]answer{}, now: time.Now, served: func() (map[schema.GroupKind]bool, error) {
		return servedKinds(dc)
	}}, nil
}

// servedKinds reads the kinds the API server serves from its discovery (two
// requests when it aggregates discovery, as every supported version does).
// A group whose discovery failed is left out.
func servedKinds(dc discovery.DiscoveryInterface) (map[schema.GroupKind]bool, error) {
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, errors.Wrap(err, "cannot read the API server's discovery")
	}
	kinds := map[schema.GroupKind]bool{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for i := range l.APIResources {
			if r := &l.APIResources[i]; !strings.Contains(r.Name, "/") {
				kinds[schema.GroupKind{Group: gv.Group, Kind: r.Kind}] = true
			}
		}
	}
	return kinds, nil
}

// restMapper remembers the answers of the mapper behind to lookups of a
// kind. controller-runtime's reads the API server's whole discovery again,
// and rebuilds every mapping, on each lookup of a kind it does not know; the
// bridge looks up kinds that may never be installed on every reconcile of
// some controllers (each enforced provider's ProviderConfig and network
// kinds, for every namespace's credentials). A kind it knows is found by
// asking each API group's mapper in turn, several times in every XR's
// reconcile (its credentials config's kind, each composed kind).
//
// A lookup of a kind the API server did not serve at its last reading of
// discovery is answered without asking the mapper behind, which would read
// the whole discovery again for each (under a lock every lookup waits on):
// the kinds a tenant names in its XRs' resourceRefs are its to choose, and
// 40 XRs of 256 references to made-up groups stalled every reconcile of
// the manager. Discovery is read again at most once in missTTL, and at once
// after a CRD changed.
type restMapper struct {
	meta.RESTMapper
	mu      sync.Mutex
	answers map[string]answer
	// forgotten counts forget's calls: an answer asked for before a CRD
	// event and returned after it is not remembered.
	forgotten uint64
	now       func() time.Time

	// served reads the kinds the API server serves; nil: every lookup not
	// remembered reaches the mapper behind.
	served func() (map[schema.GroupKind]bool, error)
	// servedMu is held while discovery is read: lookups meanwhile wait for
	// that reading instead of making their own.
	servedMu sync.Mutex
	kinds    map[schema.GroupKind]bool
	// kindsAt is when discovery was last read, kindsForgotten forgotten's
	// count then.
	kindsAt        time.Time
	kindsForgotten uint64
}

// mayServe reports whether the API server served gk at the last reading
// of discovery, reading it again when gk was not served and the reading is
// older than missTTL or a CRD changed since. When discovery cannot be
// read, the mapper behind is asked.
func (m *restMapper) mayServe(gk schema.GroupKind) bool {
	if m.served == nil {
		return true
	}
	m.servedMu.Lock()
	defer m.servedMu.Unlock()
	if m.kinds[gk] {
		return true
	}
	m.mu.Lock()
	forgotten := m.forgotten
	m.mu.Unlock()
	if m.kinds != nil && forgotten == m.kindsForgotten && m.now().Sub(m.kindsAt) < missTTL {
		return false
	}
	kinds, err := m.served()
	m.kindsAt, m.kindsForgotten = m.now(), forgotten
	if err != nil {
		return true
	}
	m.kinds = kinds
	return kinds[gk]
}

// noMatch is the mapper's answer for a kind the API server does not serve.
func noMatch(gk schema.GroupKind, versions []string) error {
	return &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
}

// answer is what the mapper behind answered to one lookup, and when.
type answer struct {
	mapping  *meta.RESTMapping
	mappings []*meta.RESTMapping
	err      error
	at       time.Time
}

// RESTMapping answers from memory a lookup answered before: a kind not
// served within missTTL, a mapping within hitTTL.
func (m *restMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	key := gk.String() + "/" + strings.Join(versions, ",")
	a, ok, asked := m.recall(key)
	if ok {
		return a.mapping, a.err
	}
	if !m.mayServe(gk) {
		return nil, noMatch(gk, versions)
	}
	r, err := m.RESTMapper.RESTMapping(gk, versions...)
	m.remember(key, answer{mapping: r, err: err}, asked)
	return r, err
}

// RESTMappings answers from memory as RESTMapping does.
func (m *restMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	key := "all:" + gk.String() + "/" + strings.Join(versions, ",")
	a, ok, asked := m.recall(key)
	if ok {
		return a.mappings, a.err
	}
	if !m.mayServe(gk) {
		return nil, noMatch(gk, versions)
	}
	r, err := m.RESTMapper.RESTMappings(gk, versions...)
	m.remember(key, answer{mappings: r, err: err}, asked)
	return r, err
}

// recall returns the answer remembered for key, if any; else how many CRD
// events there were before the mapper behind is asked.
func (m *restMapper) recall(key string) (answer, bool, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.answers[key]
	if !ok {
		return answer{}, false, m.forgotten
	}
	ttl := hitTTL
	if a.err != nil {
		ttl = missTTL
	}
	if m.now().Sub(a.at) >= ttl {
		delete(m.answers, key)
		return answer{}, false, m.forgotten
	}
	return a, true, m.forgotten
}

// remember keeps a mapping or a kind not served, unless a CRD changed
// since it was asked for (asked is recall's count); any other error (the
// API server's discovery failed) is asked again next time.
func (m *restMapper) remember(key string, a answer, asked uint64) {
	if a.err != nil && !meta.IsNoMatchError(a.err) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.forgotten != asked {
		return
	}
	if len(m.answers) >= maxAnswers {
		clear(m.answers)
	}
	a.at = m.now()
	m.answers[key] = a
}

// forget drops every answer: a CRD changed, and its kind may be served now,
// or served differently.
func (m *restMapper) forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.answers)
	m.forgotten++
}

// forgetMissesOnCRDChanges has the manager's REST mapper, when it is
// NewRESTMapper's, forget its answers on every CRD event, through the
// metadata informer of CRDs the own CRDs controller starts too.
func forgetMissesOnCRDChanges(ctx context.Context, mgr ctrl.Manager) error {
	m, ok := mgr.GetRESTMapper().(*restMapper)
	if !ok {
		return nil
	}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(extv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	inf, err := mgr.GetCache().GetInformer(ctx, crd)
	if err != nil {
		return errors.Wrap(err, "cannot watch CRDs for the REST mapper")
	}
	forget := func(any) { m.forget() }
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    forget,
		UpdateFunc: func(_, o any) { forget(o) },
		DeleteFunc: forget,
	})
	return errors.Wrap(err, "cannot watch CRDs for the REST mapper")
}

// stripManagedFields drops managed fields from what is cached, as
// controller-runtime's TransformStripManagedFields does, but from an
// unstructured object (every XR) in place, without decoding its managed
// fields first: measured, that decoding was 7 % of the manager's CPU. Of an
// unstructured object (an XR, a ProviderConfig) it also drops what the bridge
// never reads: kubectl's last applied configuration, as big as the spec of
// an object applied with kubectl, and the conditions but Crossplane's Ready
// and Synced (Responsive on every XR, a composition's own). Its strings are
// interned.
func stripManagedFields(in any) (any, error) {
	switch o := in.(type) {
	case *unstructured.Unstructured:
		if md, ok := o.Object["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
			if a, ok := md["annotations"].(map[string]any); ok {
				delete(a, corev1.LastAppliedConfigAnnotation)
			}
		}
		if st, ok := o.Object["status"].(map[string]any); ok {
			if cs, ok := st["conditions"].([]any); ok {
				st["conditions"] = slices.DeleteFunc(cs, func(c any) bool {
					m, _ := c.(map[string]any)
					return m["type"] != string(xpv2.TypeReady) && m["type"] != string(xpv2.TypeSynced)
				})
			}
		}
		o.Object, _ = interned(o.Object).(map[string]any)
		return o, nil
	case metav1.Object:
		o.SetManagedFields(nil)
		return o, nil
	}
	return in, nil
}

// internMax is the longest string value interned: longer ones (messages,
// patches, certificates) are seldom shared.
const internMax = 64

// interned returns v with its map keys and short strings interned
// (unique.Make): every XR of a kind repeats the same keys and most of the
// same values (kinds, groups, condition types and reasons, label keys), and
// the JSON decoder allocates each anew. Maps are rebuilt, lists changed in
// place. make bench-plane measures the heap per cached object.
func interned(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[unique.Make(k).Value()] = interned(e)
		}
		return out
	case []any:
		for i, e := range x {
			x[i] = interned(e)
		}
		return x
	case string:
		if len(x) <= internMax {
			return unique.Make(x).Value()
		}
	}
	return v
}

// slimMachine keeps of a Machine what the bridge reads: its metadata, its
// spec and, of its status, the bridge's own condition. CAPI's status (its
// conditions, v1beta1's too, addresses, node info) is most of a Machine, and
// Machines are most of what the bridge caches.
func slimMachine(in any) (any, error) {
	m, ok := in.(*clusterv1.Machine)
	if !ok {
		return stripManagedFields(in)
	}
	m.SetManagedFields(nil)
	verdict := meta.FindStatusCondition(m.Status.Conditions, infrav1.CrossplaneInfrastructureReadyCondition)
	status := clusterv1.MachineStatus{}
	if verdict != nil {
		status.Conditions = []metav1.Condition{*verdict}
	}
	m.Status = status
	return m, nil
}

// ClientOptions read XRs from the cache (unstructured caching on) and never
// cache Secrets or ConfigMaps.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{
		Unstructured: true,
		DisableFor:   []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}},
	}}
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
		o = ClientOptions()
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
	if err := forgetMissesOnCRDChanges(context.Background(), mgr); err != nil {
		return err
	}
	budgets := budget.NewBudgets()
	creds := resolver(mgr, o, reads, budget.FailFast{Reader: secrets, Budgets: budgets})
	kinds, err := newKindControllers(mgr, co, o.WatchFilter, creds, reads)
	if err != nil {
		return err
	}
	if err := mgr.Add(kinds); err != nil {
		return errors.Wrap(err, "cannot add the kind controllers")
	}
	if o.Webhook != nil {
		mgr.GetWebhookServer().Register(CredentialsWebhookPath, &webhook.Admission{Handler: &credentialsValidator{Granter: creds}})
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
		tenancy.WithReadAccess(reads), tenancy.WithNetworks(networkKinds(providers)), tenancy.WithCacheTransform(stripManagedFields),
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
		return managerOwners(ctx, mgr.GetClient(), o.Webhook)
	})
	if err := policy.SetupWithManager(mgr, controllerOptions(1)); err != nil {
		return err
	}
	own := &ownCRDs{client: mgr.GetClient(), want: OwnCRDLabels(), webhook: o.Webhook}
	if err := own.SetupWithManager(mgr, controllerOptions(1)); err != nil {
		return errors.Wrap(err, "cannot set up the own CRDs controller")
	}
	xrds := newXRDReconciler(mgr.GetClient(), mgr.GetAPIReader(), kinds, mgr.GetEventRecorder("capxp-xrd"), o.Webhook)
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
