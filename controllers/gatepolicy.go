package controllers

import (
	"context"
	"sort"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// GatePolicyName names the MutatingAdmissionPolicy (and its binding) that
// pauses every new machine XR at admission.
const GatePolicyName = "capxp-pause-new-machines"

// pauseExpression is the policy's mutation: add crossplane.io/paused.
var pauseExpression = `Object{metadata: Object.metadata{annotations: {"` + infrav1.CrossplanePausedAnnotation + `": "true"}}}`

// gatePolicy returns the MutatingAdmissionPolicy and binding that pause every
// XR of the given InfraMachine kinds when it is created. The API server
// applies the mutation before the object is stored, so no watcher, Crossplane
// included, ever sees a new machine XR unpaused: the gate is race-free
// without a webhook server. Resources are plural.group names.
func gatePolicy(resources []schema.GroupResource) (*admissionv1.MutatingAdmissionPolicy, *admissionv1.MutatingAdmissionPolicyBinding) {
	// CAPI clones machines from templates; a clone without the annotation
	// must never reach Crossplane unpaused.
	return pausePolicy(GatePolicyName, resources, admissionv1.Create)
}

// MovePolicyName names the MutatingAdmissionPolicy (and its binding) that
// keeps the annotations of what clusterctl move deletes from the source.
const MovePolicyName = "capxp-keep-annotations-of-moved-objects"

// deleteForMoveAnnotation is clusterctl's mark on the source objects it is
// about to delete after a move.
const deleteForMoveAnnotation = "clusterctl.cluster.x-k8s.io/delete-for-move"

// movePolicy returns the MutatingAdmissionPolicy and binding that give back
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
func movePolicy() (*admissionv1.MutatingAdmissionPolicy, *admissionv1.MutatingAdmissionPolicyBinding) {
	p, b := mutatingPolicy(MovePolicyName, []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
		Operations: []admissionv1.OperationType{admissionv1.Update},
		Rule:       admissionv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}, Scope: ptr.To(admissionv1.AllScopes)},
	}}}, `Object{metadata: Object.metadata{annotations: oldObject.metadata.annotations}}`)
	p.Spec.MatchConstraints.ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: compositeLabel, Operator: metav1.LabelSelectorOpExists},
	}}
	p.Spec.MatchConditions = []admissionv1.MatchCondition{
		{Name: "marked-for-deletion-by-clusterctl-move", Expression: `has(object.metadata.annotations) && '` + deleteForMoveAnnotation + `' in object.metadata.annotations`},
		{Name: "had-annotations-of-its-own", Expression: `has(oldObject.metadata.annotations) && !('` + deleteForMoveAnnotation + `' in oldObject.metadata.annotations)`},
	}
	return p, b
}

// compositeLabel is the label Crossplane puts on an XR and on everything it
// composed, naming the XR.
const compositeLabel = "crossplane.io/composite"

// pausePolicy returns a MutatingAdmissionPolicy that adds crossplane.io/paused
// to the given kinds on an operation, and its binding.
func pausePolicy(name string, resources []schema.GroupResource, op admissionv1.OperationType) (*admissionv1.MutatingAdmissionPolicy, *admissionv1.MutatingAdmissionPolicyBinding) {
	rules := make([]admissionv1.NamedRuleWithOperations, 0, len(resources))
	for _, r := range namespacedRules(resources) {
		rules = append(rules, admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{op}, Rule: r,
		}})
	}
	return mutatingPolicy(name, rules, pauseExpression)
}

// mutatingPolicy returns a MutatingAdmissionPolicy that applies an apply
// configuration expression to what the rules match, and its binding.
func mutatingPolicy(name string, rules []admissionv1.NamedRuleWithOperations, expression string) (*admissionv1.MutatingAdmissionPolicy, *admissionv1.MutatingAdmissionPolicyBinding) {
	labels := admissionLabels()
	p := &admissionv1.MutatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: rules},
			FailurePolicy:    ptr.To(admissionv1.Fail),
			Mutations: []admissionv1.Mutation{{
				PatchType:          admissionv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionv1.ApplyConfiguration{Expression: expression},
			}},
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

// ensurePolicies applies the gate policy for every adapted InfraMachine
// kind, the move policy while any kind is adapted and the template
// immutability policy for every adapted kind's template, and deletes each
// when it has no kind.
func ensurePolicies(ctx context.Context, c client.Client, live client.Reader, owners []metav1.OwnerReference, machines, all, templates []schema.GroupResource) error {
	gp, gb := gatePolicy(machines)
	mp, mb := movePolicy()
	tp, tb := templatePolicy(templates)
	for _, o := range []client.Object{gp, gb, mp, mb, tp, tb} {
		o.SetOwnerReferences(owners)
	}
	for _, want := range []struct {
		objs []client.Object
		none bool
	}{{[]client.Object{gp, gb}, len(machines) == 0}, {[]client.Object{mp, mb}, len(all) == 0}, {[]client.Object{tp, tb}, len(templates) == 0}} {
		if err := ensurePolicy(ctx, c, live, want.objs, want.none); err != nil {
			return err
		}
	}
	return nil
}

// ensurePolicy applies a policy and its binding, or deletes both (binding
// first) when none.
func ensurePolicy(ctx context.Context, c client.Client, live client.Reader, objs []client.Object, none bool) error {
	if none {
		for i := len(objs) - 1; i >= 0; i-- {
			if err := client.IgnoreNotFound(c.Delete(ctx, objs[i])); err != nil {
				return errors.Wrapf(err, "cannot delete %s", objs[i].GetName())
			}
		}
		return nil
	}
	for _, o := range objs {
		u, err := toUnstructured(c, o)
		if err != nil {
			return err
		}
		if err := applyIfChanged(ctx, c, live, u); err != nil {
			return err
		}
	}
	return nil
}

// namespacedRules turns resources into admission rules, one per API group,
// for every version of each: the same kinds, in a stable order, for every
// admission object the bridge maintains.
func namespacedRules(resources []schema.GroupResource) []admissionv1.Rule {
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
