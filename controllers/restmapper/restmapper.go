// Package restmapper is the manager's REST mapper: controller-runtime's
// dynamic one behind a memory of its answers, forgotten whenever a CRD
// changes.
package restmapper

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

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

// New is the manager's REST mapper: controller-runtime's dynamic
// one behind a memory of its answers (restMapper). ForgetOnCRDChanges forgets them
// whenever a CRD changes.
func New(cfg *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
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

// ForgetOnCRDChanges has the manager's REST mapper, when it is
// New's, forget its answers on every CRD event, through the
// metadata informer of CRDs the own CRDs controller starts too.
func ForgetOnCRDChanges(ctx context.Context, mgr ctrl.Manager) error {
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
