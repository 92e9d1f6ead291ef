// Package resolve checks an XR's credentials against the API server: the
// early, readable refusal on the XR and its owner (the boundary is the
// admission of managed resources). It reads configs, grants and namespaces
// from the cache and only the metadata of Secrets, uncached; what it
// decides, bridge/credentials decides.
package resolve

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/xrd"
)

// APIResolver resolves credentials against the API server.
type APIResolver struct {
	client  client.Client
	secrets client.Reader
	all     bool
	// mayNotRead, when set, says which verbs the bridge lacks to read a
	// resource through its cache (get, list, watch): a cached read of a
	// kind it may not list waits for an informer that never syncs.
	mayNotRead func(ctx context.Context, gr schema.GroupResource) ([]string, error)

	mu sync.Mutex
	// found is when each Secret was last found to exist; missing when
	// each was last found not to.
	found, missing map[types.NamespacedName]time.Time
	now            func() time.Time
}

// An APIResolverOption configures an APIResolver.
type APIResolverOption func(*APIResolver)

// WithSharedCredentialsForAllNamespaces grants every namespace every
// ClusterProviderConfig: for single-tenant management clusters only.
func WithSharedCredentialsForAllNamespaces() APIResolverOption {
	return func(r *APIResolver) { r.all = true }
}

// WithReadCheck has the resolver ask check which verbs the bridge lacks
// before it reads a credentials kind, and report those rather than read.
func WithReadCheck(check func(ctx context.Context, gr schema.GroupResource) ([]string, error)) APIResolverOption {
	return func(r *APIResolver) { r.mayNotRead = check }
}

// NewAPIResolver reads configs, grants and namespaces with c (cached) and
// only the metadata of Secrets with secrets (uncached: Secrets are not
// cached).
func NewAPIResolver(c client.Client, secrets client.Reader, opts ...APIResolverOption) *APIResolver {
	r := &APIResolver{client: c, secrets: secrets, found: map[types.NamespacedName]time.Time{}, missing: map[types.NamespacedName]time.Time{}, now: time.Now}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Resolve checks the referenced config exists where it may be looked up,
// is granted when shared (a cluster-scoped config, or an ambient identity
// named by a namespaced one), and has its credentials secrets.
func (r *APIResolver) Resolve(ctx context.Context, namespace string, ref *infrav1.ProviderConfigReference) (verdict.Verdict, error) {
	if ref == nil {
		return verdict.Verdict{Ready: true, Reason: infrav1.CompositionDefaultCredentialsReason,
			Message: "spec.providerConfigRef is not set: the composition's default credentials apply"}, nil
	}
	gk := schema.GroupKind{Group: ref.APIGroup, Kind: string(ref.Kind)}
	m, err := r.client.RESTMapper().RESTMapping(gk)
	if meta.IsNoMatchError(err) {
		return verdict.Verdict{Reason: infrav1.ProviderConfigNotFoundReason,
			Message: fmt.Sprintf("spec.providerConfigRef: the API serves no kind %s in group %s: is the provider installed?", ref.Kind, ref.APIGroup)}, nil
	}
	if err != nil {
		return verdict.Verdict{}, errors.Wrapf(err, "cannot map %s", gk)
	}
	cfg := &unstructured.Unstructured{}
	cfg.SetGroupVersionKind(m.GroupVersionKind)
	// The API's scope decides, not the kind's name: a provider's legacy
	// ProviderConfig kind is cluster-scoped, hence shared.
	shared := m.Scope.Name() == meta.RESTScopeNameRoot
	key := types.NamespacedName{Name: ref.Name}
	where := ""
	if !shared {
		// A namespaced ProviderConfig is only ever looked up in the XR's
		// own namespace: a tenant cannot name another tenant's.
		key.Namespace, where = namespace, " in namespace "+namespace
	}
	c := config{ref: ref, shared: shared, namespace: namespace}
	if shared {
		// Whether a namespace may use a shared config needs no read of it.
		if res, ok, err := r.granted(ctx, c); err != nil || !ok {
			return res, err
		}
	}
	if r.mayNotRead != nil {
		missing, err := r.mayNotRead(ctx, m.Resource.GroupResource())
		if err != nil {
			return verdict.Verdict{}, err
		}
		if len(missing) > 0 {
			return verdict.Verdict{Reason: infrav1.ForbiddenReason, Message: fmt.Sprintf("spec.providerConfigRef: the bridge may not %s, so it cannot check %s %s/%s%s: "+
				"grant it with a ClusterRole labelled %s: \"true\", which the manager's role aggregates (or use a provider whose credentials kinds it may read)",
				strings.Join(missing, ", "), ref.Kind, ref.APIGroup, ref.Name, where, xrd.AggregateToBridgeLabel)}, nil
		}
	}
	if err := r.client.Get(ctx, key, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			return verdict.Verdict{Reason: infrav1.ProviderConfigNotFoundReason,
				Message: fmt.Sprintf("spec.providerConfigRef: %s %s/%s not found%s", ref.Kind, ref.APIGroup, ref.Name, where)}, nil
		}
		return verdict.Verdict{}, errors.Wrapf(err, "cannot get %s %s", ref.Kind, ref.Name)
	}

	c.obj = fieldpath.Pave(cfg.Object)
	if !shared {
		if res, ok, err := r.granted(ctx, c); err != nil || !ok {
			return res, err
		}
	}
	for _, b := range credentials.CredentialBlocks {
		if res, ok, err := r.secret(ctx, c, b); err != nil || !ok {
			return res, err
		}
	}
	return verdict.Verdict{Ready: true, Reason: infrav1.CredentialsReadyReason,
		Message: fmt.Sprintf("%s %s/%s%s may be used", ref.Kind, ref.APIGroup, ref.Name, where)}, nil
}

// config is a credentials config being resolved for an XR's namespace.
type config struct {
	ref       *infrav1.ProviderConfigReference
	obj       *fieldpath.Paved
	shared    bool
	namespace string
}

// granted checks what of the config is shared: the config itself when it is
// cluster-scoped, else every source other than a Secret (an ambient
// identity: every namespace's ProviderConfig naming it gets the provider's
// own identity).
func (r *APIResolver) granted(ctx context.Context, c config) (verdict.Verdict, bool, error) {
	if c.shared {
		ok, msg, err := r.Granted(ctx, c.namespace, credentials.Config(c.ref.APIGroup, string(c.ref.Kind), c.ref.Name))
		if err != nil || ok {
			return verdict.Verdict{}, ok, err
		}
		return verdict.Verdict{Reason: infrav1.ProviderConfigNotGrantedReason, Message: "spec.providerConfigRef: " + msg}, false, nil
	}
	for _, b := range credentials.CredentialBlocks {
		src, err := c.obj.GetString(b + ".source")
		if err != nil && b != credentials.CredentialBlocks[0] {
			// Only spec.credentials is always there.
			continue
		}
		if src == credentials.SourceSecret {
			continue
		}
		if src == "" {
			return verdict.Verdict{Reason: infrav1.ProviderConfigNotGrantedReason, Message: fmt.Sprintf(
				"spec.providerConfigRef: %s %s %s.source is not set: only credentials from a Secret of namespace %s are the namespace's own",
				c.ref.Kind, c.ref.Name, b, c.namespace)}, false, nil
		}
		ok, msg, err := r.Granted(ctx, c.namespace, credentials.Ambient(c.ref.APIGroup, src))
		if err != nil {
			return verdict.Verdict{}, false, err
		}
		if !ok {
			return verdict.Verdict{Reason: infrav1.ProviderConfigNotGrantedReason, Message: fmt.Sprintf(
				"spec.providerConfigRef: %s %s in namespace %s uses %s.source %s, an identity every namespace shares: %s",
				c.ref.Kind, c.ref.Name, c.namespace, b, src, msg)}, false, nil
		}
	}
	return verdict.Verdict{}, true, nil
}

// Granted reports whether a namespace may use shared credentials.
func (r *APIResolver) Granted(ctx context.Context, namespace string, s credentials.Shared) (bool, string, error) {
	if r.all {
		return true, "", nil
	}
	ns := &corev1.Namespace{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: namespace}, ns); err != nil {
		return false, "", errors.Wrapf(err, "cannot get namespace %s", namespace)
	}
	grants := &infrav1.ClusterProviderConfigGrantList{}
	if err := r.client.List(ctx, grants); err != nil {
		return false, "", errors.Wrap(err, "cannot list ClusterProviderConfigGrants")
	}
	return credentials.Granted(grants.Items, s, ns)
}

// secret checks the credentials secret a block of the config names, when
// its credentials come from a Secret. It reads only the Secret's metadata.
func (r *APIResolver) secret(ctx context.Context, c config, block string) (verdict.Verdict, bool, error) {
	if src, _ := c.obj.GetString(block + ".source"); src != credentials.SourceSecret {
		return verdict.Verdict{}, true, nil
	}
	name, _ := c.obj.GetString(block + ".secretRef.name")
	ns, _ := c.obj.GetString(block + ".secretRef.namespace")
	ref := c.ref
	switch {
	case !c.shared && ns != "" && ns != c.namespace:
		// A tenant's own ProviderConfig may only use a Secret of its own
		// namespace. Looking the Secret up would tell the tenant whether it
		// exists elsewhere; the provider would not use it either.
		return verdict.Verdict{Reason: infrav1.SecretOutsideNamespaceReason,
			Message: fmt.Sprintf("%s %s %s.secretRef names namespace %s; a ProviderConfig in namespace %s may only use Secrets of its own namespace", ref.Kind, ref.Name, block, ns, c.namespace)}, false, nil
	case c.shared && ns == "":
		// A shared config's Secret is the platform's, in a namespace it
		// names: never one of the XR's namespace.
		return verdict.Verdict{Reason: infrav1.CredentialsSecretNotFoundReason,
			Message: fmt.Sprintf("%s %s %s.secretRef names no namespace: a cluster-scoped config's Secret must name its namespace", ref.Kind, ref.Name, block)}, false, nil
	case ns == "":
		ns = c.namespace
	}
	if why := credentials.InvalidSecretRef(ns, name); why != "" {
		// Validated before any request: a name the API server cannot
		// look up is a verdict on this config, not an error.
		return verdict.Verdict{Reason: infrav1.CredentialsSecretUnreadableReason,
			Message: fmt.Sprintf("%s %s %s.secretRef: %s", ref.Kind, ref.Name, block, why)}, false, nil
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	notFound := verdict.Verdict{Reason: infrav1.CredentialsSecretNotFoundReason,
		Message: fmt.Sprintf("Secret %s/%s named by %s %s %s.secretRef does not exist", ns, name, ref.Kind, ref.Name, block)}
	switch r.recently(key) {
	case seenFound:
		return verdict.Verdict{}, true, nil
	case seenMissing:
		return notFound, false, nil
	}
	s := &metav1.PartialObjectMetadata{}
	s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.secrets.Get(ctx, key, s)
	switch {
	case err == nil:
		r.mu.Lock()
		r.found[key] = r.now()
		r.mu.Unlock()
		return verdict.Verdict{}, true, nil
	case apierrors.IsNotFound(err):
		r.mu.Lock()
		r.missing[key] = r.now()
		r.mu.Unlock()
		return notFound, false, nil
	default:
		return verdict.Verdict{}, false, errors.Wrapf(err, "cannot get Secret %s/%s", ns, name)
	}
}

// What the resolver last saw of a Secret, recently enough to trust.
const (
	seenNothing = iota
	seenFound
	seenMissing
)

// RecheckMissingSecretAfter is how long a Secret found missing is taken to
// be missing without reading it again: many XRs naming one missing Secret
// cost one read, not one each.
const RecheckMissingSecretAfter = 5 * time.Second

// recently says whether the Secret was found less than credentials.RecheckSecretAfter
// ago, or found missing less than RecheckMissingSecretAfter ago.
func (r *APIResolver) recently(key types.NamespacedName) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if at, ok := r.found[key]; ok && now.Sub(at) < credentials.RecheckSecretAfter {
		return seenFound
	}
	if at, ok := r.missing[key]; ok && now.Sub(at) < RecheckMissingSecretAfter {
		return seenMissing
	}
	for k, at := range r.missing {
		// Forget what is old, so the map stays as small as what is
		// missing now.
		if now.Sub(at) >= RecheckMissingSecretAfter {
			delete(r.missing, k)
		}
	}
	return seenNothing
}
