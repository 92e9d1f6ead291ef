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
	rules := make([]admissionv1.NamedRuleWithOperations, 0, len(resources))
	for _, r := range namespacedRules(resources) {
		rules = append(rules, admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Create}, Rule: r,
		}})
	}
	labels := map[string]string{infrav1.ProviderLabel: infrav1.ProviderName}
	p := &admissionv1.MutatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: GatePolicyName, Labels: labels},
		Spec: admissionv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: rules},
			FailurePolicy:    ptr.To(admissionv1.Fail),
			// CAPI clones machines from templates; a clone without the
			// annotation must never reach Crossplane unpaused.
			Mutations: []admissionv1.Mutation{{
				PatchType:          admissionv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionv1.ApplyConfiguration{Expression: pauseExpression},
			}},
			ReinvocationPolicy: admissionv1.NeverReinvocationPolicy,
		},
	}
	b := &admissionv1.MutatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: GatePolicyName, Labels: labels},
		Spec:       admissionv1.MutatingAdmissionPolicyBindingSpec{PolicyName: GatePolicyName},
	}
	return p, b
}

// ensureGatePolicy applies the gate policy for every adapted InfraMachine
// kind, and deletes it when there is none.
func ensureGatePolicy(ctx context.Context, c client.Client, resources []schema.GroupResource) error {
	p, b := gatePolicy(resources)
	if len(resources) == 0 {
		for _, o := range []client.Object{b, p} {
			if err := client.IgnoreNotFound(c.Delete(ctx, o)); err != nil {
				return errors.Wrapf(err, "cannot delete %s", o.GetName())
			}
		}
		return nil
	}
	for _, o := range []client.Object{p, b} {
		u, err := toUnstructured(c, o)
		if err != nil {
			return err
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			return errors.Wrapf(err, "cannot apply %s %s", o.GetObjectKind().GroupVersionKind().Kind, o.GetName())
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
