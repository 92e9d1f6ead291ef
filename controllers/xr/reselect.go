package xr

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
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// Compositions: whether the one an XR composes with still matches its
// selector.
// +kubebuilder:rbac:groups=apiextensions.crossplane.io,resources=compositions,verbs=get;list;watch

// ReselectedReason is the event on an XR whose Composition the bridge
// released because it no longer matches the XR's selector.
const ReselectedReason = "CompositionReselected"

const errGetComposition = "cannot get the Composition the composite resource composes with"

// SelectorAnnotation records the selector an XR's Composition was last
// checked against.
const SelectorAnnotation = infrav1.CompositionSelectorAnnotation

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
func (r *xrReconciler) reselect(s *scope) error {
	sel := s.selection
	if sel == nil {
		return nil
	}
	meta.AddAnnotations(s.XR, map[string]string{SelectorAnnotation: sel.selector.String()})
	if sel.composition == nil || sel.selector.Matches(labels.Set(sel.composition.GetLabels())) {
		return nil
	}
	ref := sel.composition.GetName()
	if r.memory.release(s.XR.GetUID(), ref+"/"+sel.selector.String()) {
		return nil
	}
	p := fieldpath.Pave(s.XR.Object)
	for _, f := range []string{"spec.crossplane.compositionRef", "spec.crossplane.compositionRevisionRef"} {
		if err := p.DeleteField(f); err != nil {
			return errors.Wrapf(err, "cannot remove %s", f)
		}
	}
	s.Event(corev1.EventTypeNormal, ReselectedReason,
		fmt.Sprintf("Composition %s does not match spec.crossplane.compositionSelector (%s): released it for Crossplane to select again", ref, sel.selector))
	return nil
}

// reselection is what reselect decides on: the XR's selector, and the
// Composition it composes with when the selector changed since it was
// recorded (nil otherwise, and when that Composition is gone:
// Crossplane reports a missing Composition on the XR).
type reselection struct {
	selector    labels.Selector
	composition *xpextv1.Composition
}

// observeSelection reads what reselect decides on; nil when the XR has no
// valid selector or no selected Composition (Crossplane reports an invalid
// selector on the XR).
func (r *xrReconciler) observeSelection(ctx context.Context, xr *composite.Unstructured) (*reselection, error) {
	sel, ref := xr.GetCompositionSelector(), xr.GetCompositionReference()
	if sel == nil || ref == nil || ref.Name == "" {
		return nil, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, nil //nolint:nilerr // Crossplane reports an invalid selector on the XR.
	}
	s := &reselection{selector: selector}
	recorded, seen := xr.GetAnnotations()[SelectorAnnotation]
	if !seen || recorded == selector.String() {
		return s, nil
	}
	comp := &xpextv1.Composition{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: ref.Name}, comp); err != nil {
		if apierrors.IsNotFound(err) {
			return s, nil
		}
		return nil, errors.Wrap(err, errGetComposition)
	}
	s.composition = comp
	return s, nil
}
