package policies

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// ParametersPolicyName names the ValidatingAdmissionPolicy (and its
// binding) that keeps a machine XR's parameters as its template made them.
const ParametersPolicyName = "capxp-machine-parameters"

// parametersChanged matches an update that changes the spec.parameters of
// a machine XR CAPI cloned from a template (an XR of no template has none
// to keep to), but for CAPI's in-place updates and server-side apply
// dry-runs: CAPI's MachineSet controller writes a template's change to the
// XR of a Machine it updates in place, marked with CAPI's
// update-in-progress annotation, and KubeadmControlPlane dry-runs the
// change first to learn what it would be. The policy guards against a
// machine drifting from its template by mistake; it is not a tenancy
// boundary (the XR's author can write the annotation too), and nothing it
// lets through escapes the credentials checks.
var parametersChanged = `request.dryRun != true && ` +
	`has(oldObject.metadata.annotations) && '` + clusterv1.TemplateClonedFromNameAnnotation + `' in oldObject.metadata.annotations && ` +
	`!(has(object.metadata.annotations) && '` + clusterv1.UpdateInProgressAnnotation + `' in object.metadata.annotations) && ` +
	`has(object.spec) && has(oldObject.spec) && ` +
	`(has(object.spec.parameters) != has(oldObject.spec.parameters) || has(object.spec.parameters) && object.spec.parameters != oldObject.spec.parameters)`

// Parameters returns the ValidatingAdmissionPolicy and binding that refuse
// a change of the parameters of the given machine XR kinds (resources are
// plural.group names) but through CAPI: a machine's parameters are its
// template's, and a change of the template reaches the machine by a
// rollout or, where its Composition declares the change in place, by
// CAPI's in-place update. The check is a policy, not a rule in the XRD's
// schema, because CEL in a schema sees neither the annotation nor the
// dry-run.
func Parameters(resources []schema.GroupResource) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	return validatingPolicy(ParametersPolicyName, admissionv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: updatesOf(resources)},
		FailurePolicy:    ptr.To(admissionv1.Fail),
		MatchConditions:  []admissionv1.MatchCondition{{Name: "parameters-changed-outside-capi", Expression: parametersChanged}},
		Validations: []admissionv1.Validation{{
			Expression:        `false`,
			MessageExpression: `'spec.parameters: a machine takes its template\'s parameters: change the ' + object.kind + 'Template its Machine was made from, and CAPI rolls the change out (in place where the Composition declares it)'`,
			Reason:            ptr.To(metav1.StatusReasonInvalid),
		}},
	}, nil)
}
