package policies

// Credentials enforced where they are used: the ValidatingAdmissionPolicy
// that admits a managed resource of an enforced provider only with
// credentials its namespace's NamespaceCredentials lists.

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	xpmeta "github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
)

// CredentialsPolicyName names the ValidatingAdmissionPolicy (and its
// binding) that admits managed resources only with credentials their
// namespace may use.
const CredentialsPolicyName = "capxp-credentials-where-used"

// CredentialsKinds are the kinds of a provider's groups that are not managed
// resources: its credentials configs and their usages.
var CredentialsKinds = []string{"ProviderConfig", "ClusterProviderConfig", "ProviderConfigUsage", "ClusterProviderConfigUsage"}

// credentialsResources are the resources of CredentialsKinds, and their
// subresources.
func credentialsResources() []string {
	var out []string
	for _, k := range CredentialsKinds {
		plural := strings.ToLower(k) + "s"
		out = append(out, plural, plural+"/*")
	}
	return out
}

// Credentials returns the policy and binding for the managed resource
// groups the API serves of the enforced providers. Every create of a managed
// resource, and every update that sets or changes its spec.providerConfigRef,
// is admitted only when the config it names (after the CRD's default,
// ClusterProviderConfig "default") is listed in the NamespaceCredentials of
// its namespace; a namespace without one admits none. Deletes, status writes
// and updates that keep the reference (finalizers, pause) are not matched.
func Credentials(providers []credentials.Provider, groups []string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	sort.Strings(groups)
	// The provider whose managed resource is admitted: its config group.
	group := "''"
	for i := len(providers) - 1; i >= 0; i-- {
		p := providers[i]
		group = fmt.Sprintf("(request.kind.group == %q || request.kind.group.endsWith(%q)) ? %q : %s", p.ManagedGroup, "."+p.ManagedGroup, p.ConfigGroup, group)
	}
	kinds := make([]string, len(CredentialsKinds))
	for i, k := range CredentialsKinds {
		kinds[i] = "'" + k + "'"
	}
	ref := `object.spec.providerConfigRef`
	hasRefField := func(f string) string {
		return `has(object.spec) && has(` + ref + `) && has(` + ref + `.` + f + `)`
	}
	listed := func(list string) string {
		return `has(params.spec) && has(params.spec.` + list + `) && params.spec.` + list + `.exists(c, c.apiGroup == variables.group && c.kind == variables.kind && c.name == variables.name)`
	}
	return recordPolicy(CredentialsPolicyName, admissionv1.ValidatingAdmissionPolicySpec{
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
		// One condition: the API server evaluates every condition of a
		// policy.
		MatchConditions: []admissionv1.MatchCondition{{
			Name:       "a-managed-resources-credentials-set-or-changed",
			Expression: `!(request.kind.kind in [` + strings.Join(kinds, ", ") + `]) && (request.operation == 'CREATE' || ` + credentialsChanged + `)`,
		}},
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
	})
}

// recordPolicy returns a ValidatingAdmissionPolicy and binding whose
// parameter is the NamespaceCredentials of the request's namespace, failing
// closed: a namespace without a record admits nothing the policy matches.
func recordPolicy(name string, spec admissionv1.ValidatingAdmissionPolicySpec) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	spec.ParamKind = &admissionv1.ParamKind{APIVersion: infrav1.GroupVersion.String(), Kind: "NamespaceCredentials"}
	spec.FailurePolicy = ptr.To(admissionv1.Fail)
	return validatingPolicy(name, spec, &admissionv1.ParamRef{
		Name:                    infrav1.NamespaceCredentialsName,
		ParameterNotFoundAction: ptr.To(admissionv1.DenyAction),
	})
}

// NetworkPolicyName names the ValidatingAdmissionPolicy (and its binding)
// that admits a managed resource putting machines into networks only with
// network IDs its namespace owns.
const NetworkPolicyName = "capxp-network-where-used"

// Network returns the policy and binding that refuse a create, or an
// update adding an ID, of a managed resource of uses whose network fields
// (an instance's subnet and security groups, an auto scaling group's
// subnets) name an ID the NamespaceCredentials of its namespace does not
// list in spec.networks: a tenant's XR setting spec.network cannot put its
// machines into another tenant's network, whichever Composition composed
// them. IDs the object already held pass (a provider's writes, a pause), as
// does a create with an external name (a resource that exists, moved by
// clusterctl or imported); a namespace without a record admits none.
func Network(uses []credentials.NetworkUse) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
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
	return recordPolicy(NetworkPolicyName, admissionv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: rules},
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
	})
}

// LockPolicyName names the ValidatingAdmissionPolicy (and its binding) that
// keeps what the bridge judged from changing while its namespace's record
// lists it as usable.
const LockPolicyName = "capxp-credentials-locked"

// Lock returns the policy and binding that refuse, to anyone but the
// bridge (whoever may release holds), a change of a locked object's
// contents: the spec of a namespace's ProviderConfig its NamespaceCredentials
// lists in locked, or the data of a Secret listed there, the deletion of
// such a Secret (but by the namespace's own deletion), and the creation of
// either under a locked name. Without it a
// tenant could edit a Secret the bridge judged its own into one that runs a
// command in the provider, between the bridge's read and the provider's.
// Namespaces without a record lock nothing: their managed resources are
// admitted with no credentials at all.
func Lock(providers []credentials.Provider) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	configGroups := make([]string, 0, len(providers))
	for _, p := range providers {
		configGroups = append(configGroups, p.ConfigGroup)
	}
	sort.Strings(configGroups)
	rule := func(groups []string, resource string, ops ...admissionv1.OperationType) admissionv1.NamedRuleWithOperations {
		return admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: append([]admissionv1.OperationType{admissionv1.Create, admissionv1.Update}, ops...),
			Rule:       admissionv1.Rule{APIGroups: groups, APIVersions: []string{"*"}, Resources: []string{resource}, Scope: ptr.To(admissionv1.NamespacedScope)},
		}}
	}
	return validatingPolicy(LockPolicyName, admissionv1.ValidatingAdmissionPolicySpec{
		ParamKind: &admissionv1.ParamKind{APIVersion: infrav1.GroupVersion.String(), Kind: "NamespaceCredentials"},
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
			// A locked Secret is not deleted either: the record would go on
			// listing its config, judged on what is gone. Deleting the
			// config unlocks it.
			rule([]string{""}, "secrets", admissionv1.Delete), rule(configGroups, "providerconfigs"),
		}},
		FailurePolicy: ptr.To(admissionv1.Fail),
		// Only what the record locks, written by anyone but the bridge:
		// one condition, the record's short list before the authorizer,
		// as the API server evaluates every condition of a policy and
		// most Secrets written in a namespace are not locked.
		MatchConditions: []admissionv1.MatchCondition{{
			Name: "locked-and-not-the-bridge",
			Expression: `has(params.spec) && has(params.spec.locked) && params.spec.locked.exists(l, (has(l.apiGroup) ? l.apiGroup : '') == request.kind.group && ` +
				`l.kind == request.kind.kind && l.name == (request.operation == 'DELETE' ? oldObject : object).metadata.name) && !` + mayRelease,
		}},
		Variables: []admissionv1.Variable{{
			Name:       "obj",
			Expression: `request.operation == 'DELETE' ? oldObject : object`,
		}},
		Validations: []admissionv1.Validation{{
			// The namespace controller empties a deleted namespace.
			Expression: `(request.operation == 'DELETE' && has(namespaceObject.metadata.deletionTimestamp)) || (request.operation == 'UPDATE' && (request.kind.kind == 'Secret' ? object.?data == oldObject.?data : object.?spec == oldObject.?spec))`,
			MessageExpression: `(request.operation == 'DELETE' ? 'delete' : request.kind.kind == 'Secret' ? 'data' : 'spec') + ': ' + request.kind.kind + ' ' + request.namespace + '/' + variables.obj.metadata.name + ` +
				`' is locked: the credentials of namespace ' + request.namespace + ' were judged with what it holds and are in use; to change them, create a new Secret and ProviderConfig under new names and point spec.providerConfigRef at them, ` +
				`or delete the ProviderConfig that relies on it (kubectl get namespacecredentials ` + infrav1.NamespaceCredentialsName + ` -n ' + request.namespace + ' -o yaml lists what is locked)'`,
			Reason: ptr.To(metav1.StatusReasonForbidden),
		}},
	}, &admissionv1.ParamRef{
		Name:                    infrav1.NamespaceCredentialsName,
		ParameterNotFoundAction: ptr.To(admissionv1.AllowAction),
	})
}

// UnknownFamiliesPolicyName names the ValidatingAdmissionPolicy (and its
// binding) that refuses managed resources of an enforced provider's API
// groups the credentials policy does not list yet.
const UnknownFamiliesPolicyName = "capxp-credentials-unknown-families"

// builtinGroups are API groups no provider's managed resources can be in;
// the unknown-families policy does not look at their writes.
var builtinGroups = []string{"", "apps", "batch", "autoscaling", "policy", "coordination.k8s.io", "events.k8s.io", "discovery.k8s.io",
	"networking.k8s.io", "node.k8s.io", "rbac.authorization.k8s.io", "storage.k8s.io", "resource.k8s.io", "scheduling.k8s.io",
	"certificates.k8s.io", "admissionregistration.k8s.io", "apiextensions.k8s.io", "flowcontrol.apiserver.k8s.io"}

// platformGroups are CAPI's and Crossplane's own API groups, whose writes
// are most of a management cluster's: the unknown-families policy excludes
// those no enforced provider's groups cover in its rules, where no CEL runs.
var platformGroups = []string{"cluster.x-k8s.io", "infrastructure.cluster.x-k8s.io", "controlplane.cluster.x-k8s.io", "bootstrap.cluster.x-k8s.io",
	"addons.cluster.x-k8s.io", "ipam.cluster.x-k8s.io", "runtime.cluster.x-k8s.io", "clusterctl.cluster.x-k8s.io",
	"apiextensions.crossplane.io", "pkg.crossplane.io", "protection.crossplane.io", "ops.crossplane.io"}

// UnknownFamilies returns the policy and binding that refuse the create of
// a managed resource, or an update setting or changing its
// spec.providerConfigRef, in any API group of an enforced provider (its
// managed group or a subdomain of it) that known, the groups the
// credentials policy lists, does not hold: a provider family installed while
// the manager is down, or before it has seen the new CRDs, is refused until
// the credentials policy enforces it. It needs no parameter and no manager:
// API groups cannot be matched by suffix, so it matches every group but the
// built-in ones and decides in its match conditions.
func UnknownFamilies(providers []credentials.Provider, known []string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	var enforced []string
	for _, p := range providers {
		enforced = append(enforced, fmt.Sprintf("request.kind.group == %q || request.kind.group.endsWith(%q)", p.ManagedGroup, "."+p.ManagedGroup))
	}
	// Excluded by the rules: the built-in groups, the platform's that no
	// enforced provider covers, and those the credentials policy enforces.
	excluded := append(slices.Clone(builtinGroups), known...)
	for _, g := range platformGroups {
		if !slices.ContainsFunc(providers, func(p credentials.Provider) bool { return p.Manages(g) }) {
			excluded = append(excluded, g)
		}
	}
	slices.Sort(excluded)
	excluded = slices.Compact(excluded)
	kinds := make([]string, len(CredentialsKinds))
	for i, k := range CredentialsKinds {
		kinds[i] = "'" + k + "'"
	}
	return validatingPolicy(UnknownFamiliesPolicyName, admissionv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: &admissionv1.MatchResources{
			ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
				Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
				Rule:       admissionv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}, Scope: ptr.To(admissionv1.NamespacedScope)},
			}}},
			ExcludeResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
				Operations: []admissionv1.OperationType{admissionv1.OperationAll},
				Rule:       admissionv1.Rule{APIGroups: excluded, APIVersions: []string{"*"}, Resources: []string{"*"}, Scope: ptr.To(admissionv1.AllScopes)},
			}}},
		},
		FailurePolicy: ptr.To(admissionv1.Fail),
		// One condition, cheapest first: the API server evaluates every
		// condition of a policy, and most writes here are of no enforced
		// provider's group.
		MatchConditions: []admissionv1.MatchCondition{{
			Name: "an-enforced-familys-credentials-not-yet-covered",
			Expression: `(` + strings.Join(enforced, " || ") + `) && !(request.kind.kind in [` + strings.Join(kinds, ", ") + `]) && ` +
				`(request.operation == 'CREATE' || ` + credentialsChanged + `)`,
		}},
		Validations: []admissionv1.Validation{{
			Expression: `false`,
			MessageExpression: `'API group ' + request.kind.group + ' belongs to a provider whose credentials CAPXP enforces, and ` + CredentialsPolicyName + ` does not cover it yet: ` +
				`its CRDs were installed while the CAPXP manager was down or before it saw them; the manager covers it once it runs ` +
				`(kubectl get validatingadmissionpolicy ` + CredentialsPolicyName + ` -o yaml lists the groups covered)'`,
			Reason: ptr.To(metav1.StatusReasonForbidden),
		}},
	}, nil)
}
