package xrd

import (
	"context"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	kmeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/controllers/apply"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/policies"
)

// ensurePolicies applies the hold and release policies for every adapted
// kind, the move policy while any kind is adapted and the template
// immutability policy for every adapted kind's template, the parameters
// policy for every adapted InfraMachine kind, and deletes each
// when it has no kind.
func ensurePolicies(ctx context.Context, c client.Client, live client.Reader, owners []metav1.OwnerReference, all, templates, machines []schema.GroupResource) error {
	hp, hb := policies.Hold(all)
	rp, rb := policies.Release(all)
	mp, mb := policies.Move()
	tp, tb := policies.Template(templates)
	pp, pb := policies.Parameters(machines)
	if err := deleteLegacyHold(ctx, c, live); err != nil {
		return err
	}
	for _, o := range []client.Object{hp, hb, rp, rb, mp, mb, tp, tb, pp, pb} {
		o.SetOwnerReferences(owners)
	}
	// A policy kind the API server does not serve leaves the others to
	// apply; the first such error is returned once they are.
	var unserved error
	for _, want := range []struct {
		objs []client.Object
		none bool
	}{
		{[]client.Object{rp, rb}, len(all) == 0},
		{[]client.Object{hp, hb}, len(all) == 0},
		{[]client.Object{mp, mb}, len(all) == 0},
		{[]client.Object{tp, tb}, len(templates) == 0},
		{[]client.Object{pp, pb}, len(machines) == 0},
	} {
		err := apply.Policy(ctx, c, live, want.objs, want.none)
		switch {
		case err == nil:
		case kmeta.IsNoMatchError(errors.Cause(err)):
			if unserved == nil {
				unserved = err
			}
		default:
			return err
		}
	}
	return unserved
}

// deleteLegacyHold deletes the machines-only hold an earlier release
// maintained, where it remains.
func deleteLegacyHold(ctx context.Context, c client.Client, live client.Reader) error {
	p, b := policies.LegacyHold()
	if err := live.Get(ctx, client.ObjectKeyFromObject(p), &admissionv1.MutatingAdmissionPolicy{}); err != nil {
		return client.IgnoreNotFound(ignoreNoMatch(err))
	}
	return apply.Policy(ctx, c, live, []client.Object{p, b}, true)
}
