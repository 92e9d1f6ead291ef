package controllers

// Credentials enforced where they are used: the ValidatingAdmissionPolicy
// that admits a managed resource of an enforced provider only with
// credentials its namespace's NamespaceCredentials lists.

import (
	"context"
	"fmt"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	xpmeta "github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
)

// CredentialsPolicyName names the ValidatingAdmissionPolicy (and its
// binding) that admits managed resources only with credentials their
// namespace may use.
const CredentialsPolicyName = "capxp-credentials-where-used"

// credentialsKinds are the kinds of a provider's groups that are not managed
// resources: its credentials configs and their usages.
var credentialsKinds = []string{"ProviderConfig", "ClusterProviderConfig", "ProviderConfigUsage", "ClusterProviderConfigUsage"}

// credentialsResources are the resources of credentialsKinds, and their
// subresources.
func credentialsResources() []string {
	var out []string
	for _, k := range credentialsKinds {
		plural := strings.ToLower(k) + "s"
		out = append(out, plural, plural+"/*")
	}
	return out
}

// credentialsPolicy returns the policy and binding for the managed resource
// groups the API serves of the enforced providers. Every create of a managed
// resource, and every update that sets or changes its spec.providerConfigRef,
// is admitted only when the config it names (after the CRD's default,
// ClusterProviderConfig "default") is listed in the NamespaceCredentials of
// its namespace; a namespace without one admits none. Deletes, status writes
// and updates that keep the reference (finalizers, pause) are not matched.
func credentialsPolicy(providers []credentials.Provider, groups []string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	sort.Strings(groups)
	// The provider whose managed resource is admitted: its config group.
	group := "''"
	for i := len(providers) - 1; i >= 0; i-- {
		p := providers[i]
		group = fmt.Sprintf("(request.kind.group == %q || request.kind.group.endsWith(%q)) ? %q : %s", p.ManagedGroup, "."+p.ManagedGroup, p.ConfigGroup, group)
	}
	kinds := make([]string, len(credentialsKinds))
	for i, k := range credentialsKinds {
		kinds[i] = "'" + k + "'"
	}
	ref := `object.spec.providerConfigRef`
	hasRefField := func(f string) string {
		return `has(object.spec) && has(` + ref + `) && has(` + ref + `.` + f + `)`
	}
	listed := func(list string) string {
		return `has(params.spec) && has(params.spec.` + list + `) && params.spec.` + list + `.exists(c, c.apiGroup == variables.group && c.kind == variables.kind && c.name == variables.name)`
	}
	return validatingPolicy(CredentialsPolicyName, admissionv1.ValidatingAdmissionPolicySpec{
		ParamKind: &admissionv1.ParamKind{APIVersion: infrav1.GroupVersion.String(), Kind: "NamespaceCredentials"},
		// Every resource of the groups, so a kind the provider adds is
		// enforced before the bridge learns of it, but the credentials
		// kinds: the parameter is resolved before any match condition
		// is evaluated, so matching a namespace's ProviderConfigs would
		// refuse them until its record exists.
		MatchConstraints: &admissionv1.MatchResources{
			ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
				Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
				Rule:       admissionv1.Rule{APIGroups: groups, APIVersions: []string{"*"}, Resources: []string{"*"}, Scope: ptr.To(admissionv1.NamespacedScope)},
			}}},
			ExcludeResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
				Operations: []admissionv1.OperationType{admissionv1.OperationAll},
				Rule:       admissionv1.Rule{APIGroups: groups, APIVersions: []string{"*"}, Resources: credentialsResources(), Scope: ptr.To(admissionv1.AllScopes)},
			}}},
		},
		FailurePolicy: ptr.To(admissionv1.Fail),
		MatchConditions: []admissionv1.MatchCondition{
			{Name: "managed-resource", Expression: `!(request.kind.kind in [` + strings.Join(kinds, ", ") + `])`},
			{Name: "credentials-set-or-changed", Expression: `request.operation == 'CREATE' || ` + credentialsChanged},
		},
		Variables: []admissionv1.Variable{
			{Name: "group", Expression: group},
			{Name: "kind", Expression: hasRefField("kind") + ` ? string(` + ref + `.kind) : 'ClusterProviderConfig'`},
			{Name: "name", Expression: hasRefField("name") + ` ? string(` + ref + `.name) : 'default'`},
		},
		Validations: []admissionv1.Validation{{
			Expression: `(variables.kind == 'ClusterProviderConfig' && has(params.spec) && has(params.spec.allClusterConfigs) && params.spec.allClusterConfigs) || (` + listed("configs") + `)`,
			MessageExpression: `'spec.providerConfigRef: namespace ' + request.namespace + ' may not use ' + variables.kind + ' ' + variables.group + '/' + variables.name + ': ' + ((` + listed("refused") + `) ? params.spec.refused.filter(c, c.apiGroup == variables.group && c.kind == variables.kind && c.name == variables.name)[0].message : ` +
				`(variables.kind == 'ClusterProviderConfig' ? 'no ClusterProviderConfigGrant allows it; a ClusterProviderConfigGrant with providerConfigRef ' + variables.group + '/' + variables.name + ' covering namespace ' + request.namespace + ' is missing' : 'no such ProviderConfig in the namespace')) + ` +
				`' (kubectl get namespacecredentials ` + infrav1.NamespaceCredentialsName + ` -n ' + request.namespace + ' -o yaml lists what it may use)'`,
			Reason: ptr.To(metav1.StatusReasonForbidden),
		}},
	}, &admissionv1.ParamRef{
		Name:                    infrav1.NamespaceCredentialsName,
		ParameterNotFoundAction: ptr.To(admissionv1.DenyAction),
	})
}

// NetworkPolicyName names the ValidatingAdmissionPolicy (and its binding)
// that admits a managed resource putting machines into networks only with
// network IDs its namespace owns.
const NetworkPolicyName = "capxp-network-where-used"

// networkPolicy returns the policy and binding that refuse a create, or an
// update adding an ID, of a managed resource of uses whose network fields
// (an instance's subnet and security groups, an auto scaling group's
// subnets) name an ID the NamespaceCredentials of its namespace does not
// list in spec.networks: a tenant's XR setting spec.network cannot put its
// machines into another tenant's network, whichever Composition composed
// them. IDs the object already held pass (a provider's writes, a pause), as
// does a create with an external name (a resource that exists, moved by
// clusterctl or imported); a namespace without a record admits none.
func networkPolicy(uses []credentials.NetworkUse) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	var rules []admissionv1.NamedRuleWithOperations
	// ids lists [field, id] of every network ID the kind's fields hold in
	// spec.forProvider f: a string or a list of strings.
	ids := func(f string) string {
		expr := "[]"
		for i := len(uses) - 1; i >= 0; i-- {
			u := uses[i]
			var parts []string
			for _, field := range u.Fields {
				path, guard := f, []string{}
				for _, seg := range strings.Split(field, ".") {
					path += "." + seg
					guard = append(guard, "has("+path+")")
				}
				parts = append(parts, fmt.Sprintf("(%s ? (type(%s) == string ? [[%q, string(%s)]] : %s.map(x, [%q, string(x)])) : [])",
					strings.Join(guard, " && "), path, field, path, path, field))
			}
			expr = fmt.Sprintf("(request.kind.group == %q && request.kind.kind == %q) ? (%s) : %s", u.Group, u.Kind, strings.Join(parts, " + "), expr)
		}
		return expr
	}
	for _, u := range uses {
		rules = append(rules, admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
			Rule:       admissionv1.Rule{APIGroups: []string{u.Group}, APIVersions: []string{"*"}, Resources: []string{u.Resource}, Scope: ptr.To(admissionv1.NamespacedScope)},
		}})
	}
	return validatingPolicy(NetworkPolicyName, admissionv1.ValidatingAdmissionPolicySpec{
		ParamKind:        &admissionv1.ParamKind{APIVersion: infrav1.GroupVersion.String(), Kind: "NamespaceCredentials"},
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: rules},
		FailurePolicy:    ptr.To(admissionv1.Fail),
		Variables: []admissionv1.Variable{
			{Name: "f", Expression: `has(object.spec) && has(object.spec.forProvider) ? dyn(object.spec.forProvider) : dyn({})`},
			{Name: "o", Expression: `request.operation == 'UPDATE' && has(oldObject.spec) && has(oldObject.spec.forProvider) ? dyn(oldObject.spec.forProvider) : dyn({})`},
			{Name: "ids", Expression: ids("variables.f")},
			{Name: "held", Expression: "(" + ids("variables.o") + ").map(p, p[1])"},
			{Name: "owned", Expression: `has(params.spec) && has(params.spec.networks) ? dyn(params.spec.networks) : dyn({})`},
			// A resource created with its external name exists already:
			// moved by clusterctl (status is not moved, so the target's
			// record may not list its network yet) or imported.
			{Name: "exists", Expression: `request.operation == 'CREATE' && has(object.metadata.annotations) && object.metadata.annotations[?'` + xpmeta.AnnotationKeyExternalName + `'].orValue('') != ''`},
			{Name: "foreign", Expression: `variables.exists ? [] : variables.ids.filter(p, !(p[1] in variables.owned) && !(p[1] in variables.held))`},
		},
		Validations: []admissionv1.Validation{{
			Expression: `size(variables.foreign) == 0`,
			MessageExpression: `'spec.forProvider.' + string(variables.foreign[0][0]) + ': ' + string(variables.foreign[0][1]) + ' is not a network of namespace ' + request.namespace + ': a ' + request.kind.kind + ` +
				`' may name only the VPCs, subnets and security groups that managed resources in its namespace report (kubectl get namespacecredentials ` + infrav1.NamespaceCredentialsName + ` -n ' + request.namespace + ' -o yaml lists them in spec.networks); ` +
				`set spec.network on the XR to its own cluster\'s network, or have the platform import the network into the namespace as Observe-only managed resources'`,
			Reason: ptr.To(metav1.StatusReasonForbidden),
		}},
	}, &admissionv1.ParamRef{
		Name:                    infrav1.NamespaceCredentialsName,
		ParameterNotFoundAction: ptr.To(admissionv1.DenyAction),
	})
}

// LockPolicyName names the ValidatingAdmissionPolicy (and its binding) that
// keeps what the bridge judged from changing while its namespace's record
// lists it as usable.
const LockPolicyName = "capxp-credentials-locked"

// lockPolicy returns the policy and binding that refuse, to anyone but the
// bridge (whoever may release holds), a change of a locked object's
// contents: the spec of a namespace's ProviderConfig its NamespaceCredentials
// lists in locked, or the data of a Secret listed there, and the creation of
// either under a locked name (deleted and created again). Without it a
// tenant could edit a Secret the bridge judged its own into one that runs a
// command in the provider, between the bridge's read and the provider's.
// Namespaces without a record lock nothing: their managed resources are
// admitted with no credentials at all.
func lockPolicy(providers []credentials.Provider) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	configGroups := make([]string, 0, len(providers))
	for _, p := range providers {
		configGroups = append(configGroups, p.ConfigGroup)
	}
	sort.Strings(configGroups)
	rule := func(groups []string, resource string) admissionv1.NamedRuleWithOperations {
		return admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
			Rule:       admissionv1.Rule{APIGroups: groups, APIVersions: []string{"*"}, Resources: []string{resource}, Scope: ptr.To(admissionv1.NamespacedScope)},
		}}
	}
	return validatingPolicy(LockPolicyName, admissionv1.ValidatingAdmissionPolicySpec{
		ParamKind: &admissionv1.ParamKind{APIVersion: infrav1.GroupVersion.String(), Kind: "NamespaceCredentials"},
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
			rule([]string{""}, "secrets"), rule(configGroups, "providerconfigs"),
		}},
		FailurePolicy:   ptr.To(admissionv1.Fail),
		MatchConditions: []admissionv1.MatchCondition{{Name: "not-the-bridge", Expression: "!" + mayRelease}},
		Variables: []admissionv1.Variable{{
			Name: "locked",
			Expression: `has(params.spec) && has(params.spec.locked) && params.spec.locked.exists(l, (has(l.apiGroup) ? l.apiGroup : '') == request.kind.group && ` +
				`l.kind == request.kind.kind && l.name == object.metadata.name)`,
		}},
		Validations: []admissionv1.Validation{{
			Expression: `!variables.locked || (request.operation == 'UPDATE' && (request.kind.kind == 'Secret' ? object.?data == oldObject.?data : object.?spec == oldObject.?spec))`,
			MessageExpression: `(request.kind.kind == 'Secret' ? 'data' : 'spec') + ': ' + request.kind.kind + ' ' + request.namespace + '/' + object.metadata.name + ` +
				`' is locked: the credentials of namespace ' + request.namespace + ' were judged with what it holds and are in use; to change them, create a new Secret and ProviderConfig under new names and point spec.providerConfigRef at them, ` +
				`or delete the ProviderConfig that relies on it (kubectl get namespacecredentials ` + infrav1.NamespaceCredentialsName + ` -n ' + request.namespace + ' -o yaml lists what is locked)'`,
			Reason: ptr.To(metav1.StatusReasonForbidden),
		}},
	}, &admissionv1.ParamRef{
		Name:                    infrav1.NamespaceCredentialsName,
		ParameterNotFoundAction: ptr.To(admissionv1.AllowAction),
	})
}

// credentialsPolicyKey is the one request the policy's controller handles.
var credentialsPolicyKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: CredentialsPolicyName}}

// credentialsPolicyController keeps the policy's groups those of the
// enforced providers' managed resource CRDs: a provider installed later is
// enforced as soon as its CRDs are.
type credentialsPolicyController struct {
	client    client.Client
	live      client.Reader
	providers []credentials.Provider
	// uses are the kinds whose network IDs are checked.
	uses    []credentials.NetworkUse
	webhook *WebhookClientConfig
}

// SetupWithManager watches the CRDs' metadata (a CRD's name is
// plural.group).
func (r *credentialsPolicyController) SetupWithManager(mgr ctrl.Manager, o controller.Options) error {
	return errors.Wrap(ctrl.NewControllerManagedBy(mgr).
		Named("credentials-policy").
		WithOptions(o).
		WatchesMetadata(&extv1.CustomResourceDefinition{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{credentialsPolicyKey}
		}), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			_, g, _ := strings.Cut(o.GetName(), ".")
			return r.managed(g)
		}))).
		Complete(r), "cannot set up the credentials policy controller")
}

func (r *credentialsPolicyController) managed(group string) bool {
	for _, p := range r.providers {
		if p.Manages(group) {
			return true
		}
	}
	return false
}

// Reconcile applies the policy for the groups served, or deletes it when
// there are none.
func (r *credentialsPolicyController) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
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
	owners, err := managerOwners(ctx, r.client, r.webhook)
	if err != nil {
		return reconcile.Result{}, err
	}
	lp, lb := lockPolicy(r.providers)
	np, nb := networkPolicy(r.uses)
	p, b := credentialsPolicy(r.providers, groups)
	for _, o := range []client.Object{lp, lb, np, nb, p, b} {
		o.SetOwnerReferences(owners)
	}
	// Each policy is applied whatever becomes of the others.
	return reconcile.Result{}, kerrors.NewAggregate([]error{
		ensurePolicy(ctx, r.client, r.live, []client.Object{p, b}, len(groups) == 0),
		ensurePolicy(ctx, r.client, r.live, []client.Object{lp, lb}, false),
		ensurePolicy(ctx, r.client, r.live, []client.Object{np, nb}, len(r.uses) == 0),
	})
}
