package tenancy

// Credentials enforced where they are used: the ValidatingAdmissionPolicy
// that admits a managed resource of an enforced provider only with
// credentials its namespace's NamespaceCredentials lists.

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/apply"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/policies"
)

// credentialsPolicyKey is the one request the policy's controller handles.
var credentialsPolicyKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: policies.CredentialsPolicyName}}

// PolicyController keeps the policy's groups those of the
// enforced providers' managed resource CRDs: a provider installed later is
// enforced as soon as its CRDs are.
type PolicyController struct {
	client    client.Client
	live      client.Reader
	providers []credentials.Provider
	// uses are the kinds whose network IDs are checked.
	uses []credentials.NetworkUse
	// owners are the owner references every policy carries.
	owners func(context.Context) ([]metav1.OwnerReference, error)
}

// NewPolicyController returns the controller of the credentials policies
// for the providers, whose policies carry the references owners returns.
func NewPolicyController(c client.Client, live client.Reader, providers []credentials.Provider, uses []credentials.NetworkUse, owners func(context.Context) ([]metav1.OwnerReference, error)) *PolicyController {
	return &PolicyController{client: c, live: live, providers: providers, uses: uses, owners: owners}
}

// SetupWithManager watches the CRDs' metadata (a CRD's name is
// plural.group): the managed groups', and NamespaceCredentials' own, so that
// the policies that need no managed group (the lock, the kubeconfig and the
// unknown families) are applied when the manager starts, before any
// provider is installed.
func (r *PolicyController) SetupWithManager(mgr ctrl.Manager, o controller.Options) error {
	return errors.Wrap(ctrl.NewControllerManagedBy(mgr).
		Named("credentials-policy").
		WithOptions(o).
		WatchesMetadata(&extv1.CustomResourceDefinition{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{credentialsPolicyKey}
		}), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			_, g, _ := strings.Cut(o.GetName(), ".")
			return r.managed(g) || o.GetName() == recordsCRD
		}))).
		Complete(r), "cannot set up the credentials policy controller")
}

// recordsCRD names the CRD of NamespaceCredentials, the policies' parameter.
var recordsCRD = "namespacecredentials." + infrav1.GroupVersion.Group

func (r *PolicyController) managed(group string) bool {
	for _, p := range r.providers {
		if p.Manages(group) {
			return true
		}
	}
	return false
}

// Reconcile applies the policy for the groups served, or deletes it when
// there are none.
func (r *PolicyController) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(extv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList"))
	if err := r.client.List(ctx, l); err != nil {
		return reconcile.Result{}, errors.Wrap(err, "cannot list CRDs")
	}
	seen := map[string]bool{}
	var groups []string
	for i := range l.Items {
		_, g, _ := strings.Cut(l.Items[i].Name, ".")
		if r.managed(g) && !seen[g] {
			seen[g] = true
			groups = append(groups, g)
		}
	}
	owners, err := r.owners(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	// The unknown-families policy lets a group go only once the credentials
	// policy has listed it for a while: the API server loads policies
	// asynchronously, and a group neither refuses must never be.
	listed, since, err := r.listedGroups(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	known, since, wait := knownGroups(groups, listed, since, time.Now())
	res := reconcile.Result{RequeueAfter: wait}
	lp, lb := policies.Lock(r.providers)
	np, nb := policies.Network(r.uses)
	p, b := policies.Credentials(r.providers, groups)
	stamps, err := json.Marshal(since)
	if err != nil {
		return reconcile.Result{}, errors.Wrap(err, "cannot record when the policy's groups were listed")
	}
	p.SetAnnotations(map[string]string{listedSinceAnnotation: string(stamps)})
	up, ub := policies.UnknownFamilies(r.providers, known)
	kp, kb := policies.Kubeconfig()
	for _, o := range []client.Object{lp, lb, np, nb, p, b, up, ub, kp, kb} {
		o.SetOwnerReferences(owners)
	}
	// Each policy is applied whatever becomes of the others.
	return res, kerrors.NewAggregate([]error{
		apply.Policy(ctx, r.client, r.live, []client.Object{p, b}, len(groups) == 0),
		apply.Policy(ctx, r.client, r.live, []client.Object{up, ub}, len(r.providers) == 0),
		apply.Policy(ctx, r.client, r.live, []client.Object{lp, lb}, false),
		apply.Policy(ctx, r.client, r.live, []client.Object{np, nb}, len(r.uses) == 0),
		apply.Policy(ctx, r.client, r.live, []client.Object{kp, kb}, false),
	})
}

// policySettles is how long the API server is given to load a policy the
// bridge wrote before another policy relies on it.
const policySettles = 2 * time.Second

// listedSinceAnnotation records, on the credentials policy, when each of its
// API groups was first listed (RFC 3339), so that a manager that restarts
// knows which groups the API server enforces already.
const listedSinceAnnotation = "capxp.dev/groups-listed-since"

// knownGroups decides which of the groups the unknown-families policy may
// let go: those the credentials policy, as the API server holds it
// (listed), has listed for policySettles by now. since is when each listed
// group was first listed, as recorded; a listed group without a record was
// listed by an earlier manager (long since). It returns the groups known,
// when each group of groups was first listed, to be recorded, and how long
// until the next is known (0 when none waits).
func knownGroups(groups []string, listed map[string]bool, since map[string]time.Time, now time.Time) ([]string, map[string]time.Time, time.Duration) {
	out := map[string]time.Time{}
	var known []string
	var wait time.Duration
	for _, g := range groups {
		t, ok := since[g]
		switch {
		case ok && listed[g]:
		case listed[g]:
			t = time.Time{}
		default:
			t = now
		}
		out[g] = t
		if left := policySettles - now.Sub(t); left > 0 {
			if wait == 0 || left < wait {
				wait = left
			}
			continue
		}
		known = append(known, g)
	}
	return known, out, wait
}

// listedGroups reads the API groups the credentials policy lists as the API
// server holds it now, and when each was first listed: none when it does
// not exist.
func (r *PolicyController) listedGroups(ctx context.Context) (map[string]bool, map[string]time.Time, error) {
	p := &admissionv1.ValidatingAdmissionPolicy{}
	err := r.live.Get(ctx, types.NamespacedName{Name: policies.CredentialsPolicyName}, p)
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, errors.Wrap(err, "cannot get the credentials policy")
	}
	listed := map[string]bool{}
	if mc := p.Spec.MatchConstraints; mc != nil {
		for i := range mc.ResourceRules {
			for _, g := range mc.ResourceRules[i].APIGroups {
				listed[g] = true
			}
		}
	}
	// Without a record, an earlier manager listed the groups, long since;
	// a record that cannot be read counts every group as listed now.
	since := map[string]time.Time{}
	raw, ok := p.GetAnnotations()[listedSinceAnnotation]
	if err := json.Unmarshal([]byte(raw), &since); ok && err != nil {
		since = map[string]time.Time{}
		for g := range listed {
			since[g] = time.Now()
		}
	}
	return listed, since, nil
}
