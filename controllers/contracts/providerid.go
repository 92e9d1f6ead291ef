package contracts

import (
	"context"
	"fmt"
	"slices"
	"strings"

	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

const (
	errGetXRD         = "cannot get CompositeResourceDefinition"
	errGetComposition = "cannot get the Composition the composite resource composes with"
)

// providerIDTemplate is the provider ID template (infrav1.ProviderIDAnnotation)
// of the Composition a machine XR not composed yet will compose with, and
// that Composition's name for messages. The bridge picks it as Crossplane
// will: the XRD's enforced Composition, else the XR's reference, else the
// Compositions of the XR's kind its selector matches (Crossplane takes any
// one of them, so they must all declare the same template), else the XRD's
// default. None ("") when the XR has its provider ID or was composed
// before, when that Composition declares none, or when the candidates
// disagree: the provider ID is then copied from the outputs once the XR is
// Ready, as always.
func providerIDTemplate(ctx context.Context, c client.Reader, xr *composite.Unstructured) (string, string, error) {
	if id, _, _ := unstructured.NestedString(xr.Object, "spec", "providerID"); id != "" {
		return "", "", nil
	}
	if secret, _, _ := unstructured.NestedString(xr.Object, "spec", "bootstrap", "dataSecretRef", "name"); secret != "" {
		return "", "", nil
	}
	xrd, err := definition(ctx, c, xr)
	if err != nil {
		return "", "", err
	}
	ref := xr.GetCompositionReference()
	switch {
	case xrd != nil && xrd.Spec.EnforcedCompositionRef != nil:
		return compositionTemplate(ctx, c, xrd.Spec.EnforcedCompositionRef.Name)
	case ref != nil && ref.Name != "":
		return compositionTemplate(ctx, c, ref.Name)
	case xr.GetCompositionSelector() != nil:
		return selectedTemplate(ctx, c, xr)
	case xrd != nil && xrd.Spec.DefaultCompositionRef != nil:
		return compositionTemplate(ctx, c, xrd.Spec.DefaultCompositionRef.Name)
	}
	return "", "", nil
}

// definition is the XRD of xr's kind; nil if there is none (the kind is a
// CRD of its own). Read from the cache without copies: XRDs carry whole
// schemas, and nothing here is written.
func definition(ctx context.Context, c client.Reader, xr *composite.Unstructured) (*xpextv2.CompositeResourceDefinition, error) {
	gvk := xr.GroupVersionKind()
	list := &xpextv2.CompositeResourceDefinitionList{}
	if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, errors.Wrap(err, errGetXRD)
	}
	for i := range list.Items {
		x := &list.Items[i]
		if x.Spec.Group == gvk.Group && x.Spec.Names.Kind == gvk.Kind {
			return x, nil
		}
	}
	return nil, nil
}

// compositionTemplate is the template of the named Composition; none if
// it does not exist (Crossplane says so on the XR).
func compositionTemplate(ctx context.Context, c client.Reader, name string) (string, string, error) {
	list := &xpextv1.CompositionList{}
	if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return "", "", errors.Wrap(err, errGetComposition)
	}
	for i := range list.Items {
		if list.Items[i].GetName() == name {
			return list.Items[i].GetAnnotations()[infrav1.ProviderIDAnnotation], "Composition " + name, nil
		}
	}
	return "", "", nil
}

// selectedTemplate is the template every Composition of xr's kind that its
// selector matches declares; none if they differ or none matches.
func selectedTemplate(ctx context.Context, c client.Reader, xr *composite.Unstructured) (string, string, error) {
	sel, err := metav1.LabelSelectorAsSelector(xr.GetCompositionSelector())
	if err != nil {
		return "", "", nil //nolint:nilerr // Crossplane reports an invalid selector on the XR.
	}
	list := &xpextv1.CompositionList{}
	if err := c.List(ctx, list, client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
		return "", "", errors.Wrap(err, errGetComposition)
	}
	apiVersion, kind := xr.GroupVersionKind().ToAPIVersionAndKind()
	var names []string
	template := ""
	for i := range list.Items {
		comp := &list.Items[i]
		if comp.Spec.CompositeTypeRef.APIVersion != apiVersion || comp.Spec.CompositeTypeRef.Kind != kind {
			continue
		}
		t := comp.GetAnnotations()[infrav1.ProviderIDAnnotation]
		if t == "" || (template != "" && t != template) {
			return "", "", nil
		}
		template = t
		names = append(names, comp.GetName())
	}
	slices.Sort(names)
	switch len(names) {
	case 0:
		return "", "", nil
	case 1:
		return template, "Composition " + names[0], nil
	}
	return template, fmt.Sprintf("Compositions %s", strings.Join(names, ", ")), nil
}
