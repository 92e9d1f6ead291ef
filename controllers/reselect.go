package controllers

import (
	"context"
	"fmt"

	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
)

// Compositions: whether the one an XR composes with still matches its
// selector.
// +kubebuilder:rbac:groups=apiextensions.crossplane.io,resources=compositions,verbs=get;list;watch

// ReselectedReason is the event on an XR whose Composition the bridge
// released because it no longer matches the XR's selector.
const ReselectedReason = "CompositionReselected"

const errGetComposition = "cannot get the Composition the composite resource composes with"

// SelectorAnnotation records, on an adapted InfraCluster XR, the
// compositionSelector its selected Composition was last checked against.
const SelectorAnnotation = "capxp.dev/composition-selector"

// reselect makes a changed compositionSelector of an InfraCluster XR select
// the Composition again. Crossplane consults the selector only while no
// Composition is selected; CAPI keeps an InfraCluster created from a
// ClusterClass equal to its template, in place, so rebasing a Cluster onto
// a class of another backend changes the XR's selector and nothing else.
// When the selector differs from the one recorded in SelectorAnnotation and
// the selected Composition does not match it, the bridge removes
// spec.crossplane.compositionRef and compositionRevisionRef, and Crossplane
// selects again; the composed resources the new Composition does not compose
// are Crossplane's to delete. A compositionRef changed by hand, under an
// unchanged selector, is the user's explicit choice and is left alone (as
// is one with no selector). Machine XRs are replaced, never re-templated,
// so only InfraClusters are concerned (the Contract's Reselects).
func (r *xrReconciler) reselect(ctx context.Context, s *scope) error {
	sel, ref := s.XR.GetCompositionSelector(), s.XR.GetCompositionReference()
	if sel == nil || ref == nil || ref.Name == "" {
		return nil
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil //nolint:nilerr // Crossplane reports an invalid selector on the XR.
	}
	recorded, seen := s.XR.GetAnnotations()[SelectorAnnotation]
	meta.AddAnnotations(s.XR, map[string]string{SelectorAnnotation: selector.String()})
	if !seen || recorded == selector.String() {
		return nil
	}
	comp := &xpextv1.Composition{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: ref.Name}, comp); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // Crossplane reports a missing Composition on the XR.
		}
		return errors.Wrap(err, errGetComposition)
	}
	if selector.Matches(labels.Set(comp.GetLabels())) {
		return nil
	}
	key := ref.Name + "/" + selector.String()
	if r.memory.release(s.XR.GetUID(), key) {
		return nil
	}
	p := fieldpath.Pave(s.XR.Object)
	for _, f := range []string{"spec.crossplane.compositionRef", "spec.crossplane.compositionRevisionRef"} {
		if err := p.DeleteField(f); err != nil {
			return errors.Wrapf(err, "cannot remove %s", f)
		}
	}
	s.Event(corev1.EventTypeNormal, ReselectedReason,
		fmt.Sprintf("Composition %s does not match spec.crossplane.compositionSelector (%s): released it for Crossplane to select again", ref.Name, selector))
	return nil
}
