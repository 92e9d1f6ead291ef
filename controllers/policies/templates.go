package policies

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// TemplatePolicyName names the ValidatingAdmissionPolicy (and its binding)
// that keeps templates immutable.
const TemplatePolicyName = "capxp-immutable-templates"

// notATopologyDryRun matches every update but CAPI's topology dry-runs:
// CAPI's topology controller learns whether a ClusterClass's patches changed
// a template by a server-side apply dry-run of the new template over the
// current one, marked with its dry-run annotation (as CAPI's own template
// webhooks allow, sigs.k8s.io/cluster-api/util/topology.IsDryRunRequest),
// and then creates a new template rather than change this one.
var notATopologyDryRun = `!(request.dryRun == true && has(object.metadata.annotations) && '` + clusterv1.TopologyDryRunAnnotation + `' in object.metadata.annotations)`

// Template returns the ValidatingAdmissionPolicy and binding that
// refuse a changed spec of the given template kinds, CAPXP's own and those of
// every adapted XRD, but for CAPI's topology dry-runs. Immutability is a
// policy, not a rule in the templates' schemas, because CEL in a schema sees
// neither the dry-run nor the annotation. Resources are plural.group names.
func Template(resources []schema.GroupResource) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	return validatingPolicy(TemplatePolicyName, admissionv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: updatesOf(resources)},
		FailurePolicy:    ptr.To(admissionv1.Fail),
		MatchConditions:  []admissionv1.MatchCondition{{Name: "not-a-topology-dry-run", Expression: notATopologyDryRun}},
		Validations: []admissionv1.Validation{{
			Expression:        `object.spec == oldObject.spec`,
			MessageExpression: `object.kind + ' spec is immutable: create a new template and point its owner at it'`,
			Reason:            ptr.To(metav1.StatusReasonInvalid),
		}},
	}, nil)
}

// updatesOf matches every update of the given resources (plural.group
// names).
func updatesOf(resources []schema.GroupResource) []admissionv1.NamedRuleWithOperations {
	rules := make([]admissionv1.NamedRuleWithOperations, 0, len(resources))
	for _, r := range NamespacedRules(resources) {
		rules = append(rules, admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Update}, Rule: r,
		}})
	}
	return rules
}
