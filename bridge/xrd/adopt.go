package xrd

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// Labels by which a ClusterRole's rules join an aggregated one.
const (
	// AggregateToBridgeLabel adds to CAPXP's manager (its
	// capxp-system-manager-aggregated ClusterRole).
	AggregateToBridgeLabel = "capxp.dev/aggregate-to-manager"
	// AggregateToCAPILabel adds to CAPI's core manager, as CAPI's contract
	// asks of providers outside infrastructure.cluster.x-k8s.io.
	AggregateToCAPILabel = "cluster.x-k8s.io/aggregate-to-manager"
)

// Adoption is what a platform team applies beside an XRD that declares a
// contract, for CAPI and the bridge to use its kind fully.
type Adoption struct {
	// TemplateCRD is the kind's template (TemplateCRD).
	TemplateCRD *extv1.CustomResourceDefinition
	// Bridge grants the bridge what it does with the XRs: read and watch
	// them, patch them and their status.
	Bridge *rbacv1.ClusterRole
	// CAPI grants CAPI's core controllers full read and write access to the
	// XRs and the templates: they clone templates into XRs, own and delete
	// XRs, and read their status.
	CAPI *rbacv1.ClusterRole
	// Warnings are what the XRD lets happen that CAPI does not expect.
	Warnings []string
}

// Warnings are what an XRD that declares a contract lets happen that CAPI
// does not expect: a machine XRD that lets Crossplane move running machines
// to a new CompositionRevision in place, where CAPI replaces machines.
func Warnings(x *xpextv2.CompositeResourceDefinition) []string {
	if x.GetLabels()[infrav1.ContractLabel] != infrav1.ContractInfraMachine {
		return nil
	}
	if p := x.Spec.DefaultCompositionUpdatePolicy; p != nil && *p == xpv2.UpdateManual {
		return nil
	}
	return []string{fmt.Sprintf("XRD %s: running machines take a new revision of their Composition in place; "+
		"set spec.defaultCompositionUpdatePolicy: Manual so that a change reaches machines only through CAPI's rollout", x.Name)}
}

// Adopt makes the Adoption of an XRD; crossplane is the schema of
// spec.crossplane (see TemplateCRD).
func Adopt(x *xpextv2.CompositeResourceDefinition, crossplane extv1.JSONSchemaProps) (*Adoption, error) {
	crd, err := TemplateCRD(x, crossplane)
	if err != nil {
		return nil, err
	}
	role := func(name, label string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{
			TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{label: "true"},
				Annotations: map[string]string{XRDAnnotation: x.Name}},
			Rules: rules,
		}
	}
	group := []string{x.Spec.Group}
	return &Adoption{
		TemplateCRD: crd,
		Bridge: role("capxp:bridge:"+x.Name, AggregateToBridgeLabel,
			rbacv1.PolicyRule{APIGroups: group, Resources: []string{x.Spec.Names.Plural}, Verbs: []string{"get", "list", "watch", "patch"}},
			rbacv1.PolicyRule{APIGroups: group, Resources: []string{x.Spec.Names.Plural + "/status"}, Verbs: []string{"patch"}}),
		CAPI: role("capxp:capi:"+x.Name, AggregateToCAPILabel,
			rbacv1.PolicyRule{APIGroups: group, Resources: []string{x.Spec.Names.Plural, crd.Spec.Names.Plural},
				Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"}}),
		Warnings: Warnings(x),
	}, nil
}

// Objects are the adoption's objects in the order to apply them.
func (a *Adoption) Objects() []runtime.Object {
	return []runtime.Object{a.TemplateCRD, a.Bridge, a.CAPI}
}
