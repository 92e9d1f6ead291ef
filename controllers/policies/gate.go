// Package policies builds the admission objects the bridge maintains: the
// MutatingAdmissionPolicies and ValidatingAdmissionPolicies (and their
// bindings) that hold new XRs paused, let only the bridge release them,
// keep moved objects' annotations, keep templates immutable, and admit
// managed resources only with credentials and networks their namespace may
// use. It only builds them; the bridge's controllers apply them.
package policies

import (
	"sort"
	"strconv"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// Labels labels every admission object the bridge maintains as the
// provider's. Not with clusterctl's label: `clusterctl upgrade` deletes what
// carries it before it installs the new version, and the machine gate must
// hold while the new manager starts. `clusterctl delete
// --include-namespace` removes them through their owner, the manager's
// namespace (the bridge sets it).
func Labels() map[string]string {
	return map[string]string{infrav1.ProviderLabel: infrav1.ProviderName}
}

// HoldPolicyName names the MutatingAdmissionPolicy (and its binding) that
// holds every new XR of an adapted kind paused, and every XR whose
// credentials reference someone but the bridge changes.
const HoldPolicyName = "capxp-hold-composites"

// legacyHoldPolicyName is the name an earlier release gave the policy that
// held new machine XRs only; it is deleted where it remains.
const legacyHoldPolicyName = "capxp-pause-new-machines"

// LegacyHold is the machines-only hold an earlier release maintained, to
// delete where it remains.
func LegacyHold() (*admissionv1.MutatingAdmissionPolicy, *admissionv1.MutatingAdmissionPolicyBinding) {
	return mutatingPolicy(legacyHoldPolicyName, nil, pause)
}

// ReleasePolicyName names the ValidatingAdmissionPolicy (and its binding)
// that lets only the bridge (whoever RBAC lets release holds) lift a hold,
// and bounds what anyone else writes into an XR's resourceRefs.
const ReleasePolicyName = "capxp-only-the-bridge-releases"

// labelsBounded is true when the label map m is as a label selector may be.
func labelsBounded(m string) string {
	return `(size(` + m + `) <= 64 && ` + m + `.all(k, size(k) <= 317 && size(` + m + `[k]) <= 63))`
}

// MaxResourceRefs is how many composed resources an XR of an adapted kind
// may list in spec.crossplane.resourceRefs (the largest shipped Composition
// composes 32).
const MaxResourceRefs = 256

// pause is the hold's mutation: add crossplane.io/paused and, where an
// update pauses an XR that was not paused (its credentials changed), the
// bridge's mark too, so that the bridge lifts this pause once it has judged
// them: an XR that composed and has no CAPI owner keeps any other pause.
// A JSON patch, not an apply configuration: the API server applies it to the
// object as it is, where an apply configuration costs it a typed merge on
// every XR created.
var pause = admissionv1.Mutation{
	PatchType: admissionv1.PatchTypeJSONPatch,
	JSONPatch: &admissionv1.JSONPatch{Expression: `(request.operation == 'UPDATE' && !` + isPaused("oldObject") + `) ? ` +
		`(has(object.metadata.annotations) ? [` + addAnnotation(infrav1.CrossplanePausedAnnotation) + `, ` + addAnnotation(infrav1.CredentialsHoldAnnotation) + `] : ` +
		`[JSONPatch{op: "add", path: "/metadata/annotations", value: {"` + infrav1.CrossplanePausedAnnotation + `": "true", "` + infrav1.CredentialsHoldAnnotation + `": "true"}}]) : ` +
		`(has(object.metadata.annotations) ? [` + addAnnotation(infrav1.CrossplanePausedAnnotation) + `] : ` +
		`[JSONPatch{op: "add", path: "/metadata/annotations", value: {"` + infrav1.CrossplanePausedAnnotation + `": "true"}}])`},
}

// addAnnotation is a JSON patch operation setting annotation key to "true".
func addAnnotation(key string) string {
	return `JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey("` + key + `"), value: "true"}`
}

// mayRelease is true when the request's user may lift a hold: RBAC grants
// the verb release on holds.capxp.dev to the bridge's role alone (and to
// cluster administrators, who may do anything). The policies ask the
// authorizer, so they name no identity: they are the same whoever runs the
// bridge, on every install path.
const mayRelease = `authorizer.group('` + HoldGroup + `').resource('` + HoldResource + `').check('` + HoldVerb + `').allowed()`

// What RBAC must grant to lift a hold (controllers/rbac.go).
const (
	HoldGroup    = "capxp.dev"
	HoldResource = "holds"
	HoldVerb     = "release"
)

// hasRef is true when o names credentials.
func hasRef(o string) string {
	return `(has(` + o + `.spec) && has(` + o + `.spec.providerConfigRef))`
}

// credentialsChanged is true when an update sets, changes or removes the
// XR's providerConfigRef.
var credentialsChanged = hasRef("object") + ` != ` + hasRef("oldObject") + ` || (` + hasRef("object") +
	` && object.spec.providerConfigRef != oldObject.spec.providerConfigRef)`

// isPaused is true when o carries crossplane.io/paused: "true".
func isPaused(o string) string {
	return `(has(` + o + `.metadata.annotations) && '` + infrav1.CrossplanePausedAnnotation + `' in ` + o +
		`.metadata.annotations && ` + o + `.metadata.annotations['` + infrav1.CrossplanePausedAnnotation + `'] == 'true')`
}

// hasMarker is true when o carries the bridge's hold marker.
func hasMarker(o string) string {
	return `(has(` + o + `.metadata.annotations) && '` + infrav1.CredentialsHoldAnnotation + `' in ` + o + `.metadata.annotations)`
}

// marker is o's hold marker, "" when it has none.
func marker(o string) string {
	return `(` + hasMarker(o) + ` ? ` + o + `.metadata.annotations['` + infrav1.CredentialsHoldAnnotation + `'] : '')`
}

// Hold returns the MutatingAdmissionPolicy and binding that pause
// (crossplane.io/paused) every XR of the adapted kinds when it is created,
// and when anyone but the bridge changes its credentials reference. The API
// server applies the mutation before the object is stored, so no watcher,
// Crossplane included, ever sees an XR unpaused whose credentials the
// bridge has not checked: composition waits for the check without a webhook
// server, on every install path. CAPI clones machines from templates, and
// clusterctl move creates paused XRs in the target: both arrive held too.
// Resources are plural.group names.
func Hold(resources []schema.GroupResource) (*admissionv1.MutatingAdmissionPolicy, *admissionv1.MutatingAdmissionPolicyBinding) {
	rules := make([]admissionv1.NamedRuleWithOperations, 0, len(resources))
	for _, r := range NamespacedRules(resources) {
		rules = append(rules, admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}, Rule: r,
		}})
	}
	p, b := mutatingPolicy(HoldPolicyName, rules, pause)
	// One condition, cheapest first: the API server evaluates every
	// condition of a policy, and asks the authorizer only of the few
	// updates that change the credentials.
	p.Spec.MatchConditions = []admissionv1.MatchCondition{{
		Name:       "new-or-credentials-changed-by-someone-else",
		Expression: `request.operation == 'CREATE' || ((` + credentialsChanged + `) && !` + mayRelease + `)`,
	}}
	return p, b
}

// Release returns the ValidatingAdmissionPolicy and binding that
// refuse, to anyone but the bridge, lifting a hold: removing or changing
// crossplane.io/paused on an XR of the adapted kinds that carries it, or
// creating one without it (where the API server has no
// MutatingAdmissionPolicy to add it, a creator must).
func Release(resources []schema.GroupResource) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	rules := make([]admissionv1.NamedRuleWithOperations, 0, len(resources))
	for _, r := range NamespacedRules(resources) {
		rules = append(rules, admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}, Rule: r,
		}})
	}
	return validatingPolicy(ReleasePolicyName, admissionv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: rules},
		FailurePolicy:    ptr.To(admissionv1.Fail),
		// Only a write that creates the XR, or changes its annotations
		// or spec.crossplane, can do what the validations refuse; the
		// authorizer is asked of those alone (one condition: the API
		// server evaluates every condition of a policy). What an XR
		// held before the policy was installed stays allowed until it
		// changes.
		MatchConditions: []admissionv1.MatchCondition{{
			Name: "changes-what-only-the-bridge-may",
			Expression: `(request.operation == 'CREATE' || object.metadata.?annotations != oldObject.metadata.?annotations || ` +
				`object.?spec.?crossplane != oldObject.?spec.?crossplane) && !` + mayRelease,
		}},
		Validations: []admissionv1.Validation{{
			// The bridge lifts the holds it marks: a marker set by
			// anyone else would have it lift a pause it never set (a
			// gated machine's, a moved XR's). The one exception is the
			// hold's own: an update that changes the credentials of an
			// XR that was not paused is paused and marked at once.
			Expression: `request.operation == 'CREATE' ? !` + hasMarker("object") + ` : (` + marker("object") + ` == ` + marker("oldObject") + ` || ` +
				`(` + marker("object") + ` == 'true' && !` + isPaused("oldObject") + ` && ` + isPaused("object") + ` && (` + credentialsChanged + `)))`,
			MessageExpression: `'metadata.annotations[` + infrav1.CredentialsHoldAnnotation + `]: only CAPXP marks the holds it lifts; leave the annotation as it is'`,
			Reason:            ptr.To(metav1.StatusReasonForbidden),
		}, {
			// Crossplane writes what an XR composed; anyone may write it
			// (clusterctl move does). Bounded, so that an XR cannot make
			// the bridge hold and walk a list as long as the object may
			// be: thousands of references cost it about 15 times their
			// size in memory.
			Expression: `!has(object.spec.crossplane) || !has(object.spec.crossplane.resourceRefs) || size(object.spec.crossplane.resourceRefs) <= ` + strconv.Itoa(MaxResourceRefs),
			MessageExpression: `'spec.crossplane.resourceRefs: at most ` + strconv.Itoa(MaxResourceRefs) +
				` composed resources per composite resource, ' + string(size(object.spec.crossplane.resourceRefs)) + ' given; compose the rest through nested composite resources'`,
			Reason: ptr.To(metav1.StatusReasonInvalid),
		}, {
			// Each reference names an object as Kubernetes names one.
			Expression: `!has(object.spec.crossplane) || !has(object.spec.crossplane.resourceRefs) || size(object.spec.crossplane.resourceRefs) > ` + strconv.Itoa(MaxResourceRefs) +
				` || object.spec.crossplane.resourceRefs.all(r, size(r.apiVersion) <= 317 && size(r.kind) <= 63 && (!has(r.name) || size(r.name) <= 253))`,
			Message: "spec.crossplane.resourceRefs: each reference names an object: apiVersion at most 317 characters, kind 63, name 253",
			Reason:  ptr.To(metav1.StatusReasonInvalid),
		}, {
			// Composition selectors select by labels, bounded as labels are.
			Expression: `!has(object.spec.crossplane) || ((!has(object.spec.crossplane.compositionSelector) || ` + labelsBounded("object.spec.crossplane.compositionSelector.matchLabels") +
				`) && (!has(object.spec.crossplane.compositionRevisionSelector) || ` + labelsBounded("object.spec.crossplane.compositionRevisionSelector.matchLabels") + `))`,
			Message: "spec.crossplane: a composition (revision) selector's matchLabels holds at most 64 labels, keys of at most 317 characters and values of at most 63",
			Reason:  ptr.To(metav1.StatusReasonInvalid),
		}, {
			Expression: isPaused("object") + ` || (request.operation == 'UPDATE' && !` + isPaused("oldObject") + `)`,
			MessageExpression: `'metadata.annotations[` + infrav1.CrossplanePausedAnnotation + `]: ' + (request.operation == 'CREATE' ? 'a new ' + object.kind + ' is held paused until CAPXP has checked its credentials; this API server cannot add the hold itself, so create it with ` +
				infrav1.CrossplanePausedAnnotation + `: "true"' : 'only CAPXP lifts the hold on ' + object.kind + ' ' + object.metadata.name + ', once the credentials its spec.providerConfigRef names are granted to namespace ' + object.metadata.namespace + '; pause and resume it with the cluster.x-k8s.io/paused annotation or the Cluster\'s spec.paused')`,
			Reason: ptr.To(metav1.StatusReasonForbidden),
		}},
	}, nil)
}

// MovePolicyName names the MutatingAdmissionPolicy (and its binding) that
// keeps the annotations of what clusterctl move deletes from the source.
const MovePolicyName = "capxp-keep-annotations-of-moved-objects"

// deleteForMoveAnnotation is clusterctl's mark on the source objects it is
// about to delete after a move.
const deleteForMoveAnnotation = "clusterctl.cluster.x-k8s.io/delete-for-move"

// Move returns the MutatingAdmissionPolicy and binding that give back
// their annotations to XRs and composed resources (whatever carries
// Crossplane's crossplane.io/composite label) when clusterctl marks them for
// deletion after a move. clusterctl marks an object by replacing all its
// annotations with its own, then deletes it. Without the policy, a source XR
// would lose crossplane.io/paused, and Crossplane (which checks the pause
// before the deletion) could compose again, in the source, what the target
// now manages, for the garbage collector to delete; and a source managed
// resource would lose crossplane.io/external-name, and a provider that
// observes it before the deletion would not find its external resource, and
// create another.
func Move() (*admissionv1.MutatingAdmissionPolicy, *admissionv1.MutatingAdmissionPolicyBinding) {
	p, b := mutatingPolicy(MovePolicyName, []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
		Operations: []admissionv1.OperationType{admissionv1.Update},
		Rule:       admissionv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}, Scope: ptr.To(admissionv1.AllScopes)},
	}}}, admissionv1.Mutation{
		PatchType:          admissionv1.PatchTypeApplyConfiguration,
		ApplyConfiguration: &admissionv1.ApplyConfiguration{Expression: `Object{metadata: Object.metadata{annotations: oldObject.metadata.annotations}}`},
	})
	// Leases and events, the most frequent updates, are never moved.
	p.Spec.MatchConstraints.ExcludeResourceRules = []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
		Operations: []admissionv1.OperationType{admissionv1.OperationAll},
		Rule:       admissionv1.Rule{APIGroups: []string{"coordination.k8s.io", "events.k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"*"}, Scope: ptr.To(admissionv1.AllScopes)},
	}}, {RuleWithOperations: admissionv1.RuleWithOperations{
		Operations: []admissionv1.OperationType{admissionv1.OperationAll},
		Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"*"}, Resources: []string{"events"}, Scope: ptr.To(admissionv1.AllScopes)},
	}}}
	p.Spec.MatchConstraints.ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: compositeLabel, Operator: metav1.LabelSelectorOpExists},
	}}
	// One condition: the API server evaluates every condition of a policy,
	// on every update of what Crossplane composed.
	p.Spec.MatchConditions = []admissionv1.MatchCondition{{
		Name: "marked-for-deletion-by-clusterctl-move-now",
		Expression: `has(object.metadata.annotations) && '` + deleteForMoveAnnotation + `' in object.metadata.annotations && ` +
			`has(oldObject.metadata.annotations) && !('` + deleteForMoveAnnotation + `' in oldObject.metadata.annotations)`,
	}}
	return p, b
}

// compositeLabel is the label Crossplane puts on an XR and on everything it
// composed, naming the XR.
const compositeLabel = "crossplane.io/composite"

// mutatingPolicy returns a MutatingAdmissionPolicy that applies mutation to
// what the rules match, and its binding.
func mutatingPolicy(name string, rules []admissionv1.NamedRuleWithOperations, mutation admissionv1.Mutation) (*admissionv1.MutatingAdmissionPolicy, *admissionv1.MutatingAdmissionPolicyBinding) {
	labels := Labels()
	p := &admissionv1.MutatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionv1.MutatingAdmissionPolicySpec{
			MatchConstraints:   &admissionv1.MatchResources{ResourceRules: rules},
			FailurePolicy:      ptr.To(admissionv1.Fail),
			Mutations:          []admissionv1.Mutation{mutation},
			ReinvocationPolicy: admissionv1.NeverReinvocationPolicy,
		},
	}
	b := &admissionv1.MutatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       admissionv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name},
	}
	return p, b
}

// validatingPolicy returns a ValidatingAdmissionPolicy named name and its
// binding of the same name, which denies what the policy refuses, with
// paramRef when the policy has a parameter.
func validatingPolicy(name string, spec admissionv1.ValidatingAdmissionPolicySpec, paramRef *admissionv1.ParamRef) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	labels := Labels()
	p := &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       spec,
	}
	b := &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ParamRef:          paramRef,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	return p, b
}

// NamespacedRules turns resources into admission rules, one per API group,
// for every version of each: the same kinds, in a stable order, for every
// admission object the bridge maintains.
func NamespacedRules(resources []schema.GroupResource) []admissionv1.Rule {
	byGroup := map[string][]string{}
	for _, r := range resources {
		byGroup[r.Group] = append(byGroup[r.Group], r.Resource)
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	rules := make([]admissionv1.Rule, 0, len(groups))
	for _, g := range groups {
		rs := byGroup[g]
		sort.Strings(rs)
		rules = append(rules, admissionv1.Rule{APIGroups: []string{g}, APIVersions: []string{"*"}, Resources: rs, Scope: ptr.To(admissionv1.NamespacedScope)})
	}
	return rules
}
