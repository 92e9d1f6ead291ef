package contracts

import (
	"testing"

	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

func TestProviderIDTemplate(t *testing.T) {
	machineGVK := infrav1.GroupVersion.WithKind(infrav1.CrossplaneMachineKind)
	comp := func(name, template string, labels map[string]string) *xpextv1.Composition {
		c := &xpextv1.Composition{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: xpextv1.CompositionSpec{CompositeTypeRef: xpextv1.TypeReferenceTo(machineGVK)}}
		if template != "" {
			c.Annotations = map[string]string{infrav1.ProviderIDAnnotation: template}
		}
		return c
	}
	xrd := func(def, enforced string) *xpextv2.CompositeResourceDefinition {
		x := &xpextv2.CompositeResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "crossplanemachines." + machineGVK.Group}}
		x.Spec.Group, x.Spec.Names.Kind = machineGVK.Group, machineGVK.Kind
		if def != "" {
			x.Spec.DefaultCompositionRef = &xpextv2.CompositionReference{Name: def}
		}
		if enforced != "" {
			x.Spec.EnforcedCompositionRef = &xpextv2.CompositionReference{Name: enforced}
		}
		return x
	}
	local := map[string]string{"capxp.dev/backend": "local"}
	xr := func(edit func(*composite.Unstructured)) *composite.Unstructured {
		u := composite.New(composite.WithGroupVersionKind(machineGVK))
		u.SetName("m-1")
		if edit != nil {
			edit(u)
		}
		return u
	}
	selecting := func(u *composite.Unstructured) { u.SetCompositionSelector(&metav1.LabelSelector{MatchLabels: local}) }
	cases := map[string]struct {
		reason       string
		objs         []client.Object
		xr           *composite.Unstructured
		want, wantBy string
	}{
		"Referenced": {
			reason: "the Composition the XR names",
			objs:   []client.Object{xrd("", ""), comp("a", "x:///{metadata.name}", nil), comp("b", "y:///{metadata.name}", nil)},
			xr:     xr(func(u *composite.Unstructured) { u.SetCompositionReference(&corev1.ObjectReference{Name: "b"}) }),
			want:   "y:///{metadata.name}", wantBy: "Composition b",
		},
		"Enforced": {
			reason: "the XRD's enforced Composition wins over the XR's reference, as in Crossplane",
			objs:   []client.Object{xrd("", "a"), comp("a", "x:///{metadata.name}", nil), comp("b", "y:///{metadata.name}", nil)},
			xr:     xr(func(u *composite.Unstructured) { u.SetCompositionReference(&corev1.ObjectReference{Name: "b"}) }),
			want:   "x:///{metadata.name}", wantBy: "Composition a",
		},
		"SelectedAgree": {
			reason: "every Composition of the kind the selector matches declares the same template",
			objs: []client.Object{xrd("", ""), comp("l1", "x:///{metadata.name}", local), comp("l2", "x:///{metadata.name}", local),
				comp("aws", "", map[string]string{"capxp.dev/backend": "aws"})},
			xr:   xr(selecting),
			want: "x:///{metadata.name}", wantBy: "Compositions l1, l2",
		},
		"SelectedDisagree": {
			reason: "Crossplane takes any one of the matches: if they differ, nothing can be known before composing",
			objs:   []client.Object{xrd("", ""), comp("l1", "x:///{metadata.name}", local), comp("l2", "y:///{metadata.name}", local)},
			xr:     xr(selecting),
		},
		"SelectedOneDeclaresNone": {
			reason: "one match without a template is a disagreement too",
			objs:   []client.Object{xrd("", ""), comp("l1", "x:///{metadata.name}", local), comp("l2", "", local)},
			xr:     xr(selecting),
		},
		"SelectedOtherKind": {
			reason: "Compositions of another kind are not candidates, whatever their labels",
			objs: []client.Object{xrd("", ""), comp("l1", "x:///{metadata.name}", local), func() client.Object {
				c := comp("pool", "z:///{metadata.name}", local)
				c.Spec.CompositeTypeRef.Kind = infrav1.CrossplaneMachinePoolKind
				return c
			}()},
			xr:   xr(selecting),
			want: "x:///{metadata.name}", wantBy: "Composition l1",
		},
		"SelectedNone": {
			reason: "no match: Crossplane says so on the XR",
			objs:   []client.Object{xrd("", ""), comp("aws", "x:///{metadata.name}", map[string]string{"capxp.dev/backend": "aws"})},
			xr:     xr(selecting),
		},
		"Default": {
			reason: "without a reference or a selector, the XRD's default",
			objs:   []client.Object{xrd("a", ""), comp("a", "x:///{metadata.name}", nil)},
			xr:     xr(nil),
			want:   "x:///{metadata.name}", wantBy: "Composition a",
		},
		"ReferencedMissing": {
			reason: "a reference to a Composition that does not exist: Crossplane says so on the XR",
			objs:   []client.Object{xrd("", "")},
			xr:     xr(func(u *composite.Unstructured) { u.SetCompositionReference(&corev1.ObjectReference{Name: "gone"}) }),
		},
		"HasProviderID": {
			reason: "an XR with a provider ID keeps it",
			objs:   []client.Object{xrd("a", ""), comp("a", "x:///{metadata.name}", nil)},
			xr:     xr(func(u *composite.Unstructured) { u.Object["spec"] = map[string]any{"providerID": "byo://h"} }),
		},
		"ComposedBefore": {
			reason: "an XR whose gate opened before has its Composition's report",
			objs:   []client.Object{xrd("a", ""), comp("a", "x:///{metadata.name}", nil)},
			xr: xr(func(u *composite.Unstructured) {
				u.Object["spec"] = map[string]any{"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}}}
			}),
		},
		"NoXRD": {
			reason: "a kind that is a CRD of its own: its reference alone",
			objs:   []client.Object{comp("a", "x:///{metadata.name}", nil)},
			xr:     xr(func(u *composite.Unstructured) { u.SetCompositionReference(&corev1.ObjectReference{Name: "a"}) }),
			want:   "x:///{metadata.name}", wantBy: "Composition a",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme()).WithObjects(tc.objs...).Build()
			got, by, err := providerIDTemplate(t.Context(), c, tc.xr)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || by != tc.wantBy {
				t.Errorf("%s\nproviderIDTemplate() = %q, %q; want %q, %q", tc.reason, got, by, tc.want, tc.wantBy)
			}
		})
	}
}
