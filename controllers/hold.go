package controllers

import (
	"context"
	"fmt"
	"strings"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	corev1 "k8s.io/api/core/v1"
	kmeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

const (
	errHold   = "cannot pause composed resource whose credentials may not be used"
	errResume = "cannot resume composed resource"
	// maxNesting bounds how deep the bridge follows composed XRs.
	maxNesting = 8
	// maxComposed bounds how many composed resources, nested XRs'
	// included, the bridge follows for one XR.
	maxComposed        = 4096
	errTooManyComposed = "the XR's resource references name more than %d composed resources, nested XRs' included: the bridge follows no more"
	// annotationTrue is the value of a set boolean annotation.
	annotationTrue = "true"
)

// holdComposed pauses (on) every resource an XR composed, nested XRs'
// resources included, when the XR's credentials may not be used: pausing
// the XR stops Crossplane composing anything new, but what it composed
// already keeps running with the credentials until its own reconciliation
// is paused. Each one paused this way is marked, and resumed (off) once the
// credentials may be used again; a pause of anyone else's stays.
func (r *xrReconciler) holdComposed(ctx context.Context, s *scope, on bool) error {
	if len(s.xr.GetResourceReferences()) == 0 {
		return nil
	}
	tree, err := r.composedTree(ctx, s)
	if err != nil {
		return err
	}
	for _, obj := range tree {
		held := obj.GetAnnotations()[infrav1.CredentialsHoldAnnotation] == annotationTrue
		orig := obj.DeepCopy()
		switch {
		case on && !held && !meta.IsPaused(obj):
			meta.AddAnnotations(obj, map[string]string{infrav1.CrossplanePausedAnnotation: annotationTrue, infrav1.CredentialsHoldAnnotation: annotationTrue})
		case !on && held:
			liftPause(obj, infrav1.CredentialsHoldAnnotation)
		default:
			continue
		}
		msg := errHold
		if !on {
			msg = errResume
		}
		// The patch carries the resourceVersion read: a hold or release
		// decided on a stale read conflicts and is decided again.
		err := r.client.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(fieldManager))
		if err = client.IgnoreNotFound(err); err != nil {
			return errors.Wrapf(err, "%s %s %s", msg, obj.Kind, obj.GetName())
		}
		if on {
			ctrl.LoggerFrom(ctx).Info("Paused composed resource: its composite resource's credentials may not be used", "kind", obj.Kind, "name", obj.GetName())
		}
	}
	return nil
}

// liftPause removes a pause the bridge set on a composed resource for one
// reason (marker): the pause goes with it, unless the resource is also
// paused because the credentials it names were revoked; that pause then
// stays, the revocation's to lift.
func liftPause(obj metav1.Object, marker string) {
	meta.RemoveAnnotations(obj, marker)
	if obj.GetLabels()[infrav1.CredentialsRevokedLabel] != "" {
		meta.AddLabels(obj, map[string]string{infrav1.CredentialsRevokedLabel: infrav1.CredentialsRevokedPaused})
		return
	}
	meta.RemoveAnnotations(obj, infrav1.CrossplanePausedAnnotation)
}

// composedTree returns every resource the XR controls through its
// resource references, and through those of the XRs it composed, down to
// maxNesting levels, each once: resource references are tenant-written, and
// an XR whose references name itself, or the same XR many times, must not
// grow the walk (a visited set by UID), nor may a long list (at most
// maxComposed resources, past which the walk is an error the XR reports).
// References it may not or cannot follow become events on the XR, never a
// blocked reconcile.
func (r *xrReconciler) composedTree(ctx context.Context, s *scope) ([]*metav1.PartialObjectMetadata, error) {
	var all []*metav1.PartialObjectMetadata
	visited := map[types.UID]bool{s.xr.GetUID(): true}
	level := []*composite.Unstructured{s.xr}
	for depth := 0; len(level) > 0 && depth < maxNesting; depth++ {
		var next []*composite.Unstructured
		for _, xr := range level {
			controlled, _, err := r.composedControlled(ctx, xr)
			if err != nil {
				return nil, err
			}
			for _, obj := range controlled {
				if visited[obj.GetUID()] {
					continue
				}
				visited[obj.GetUID()] = true
				if len(all) == maxComposed {
					return nil, errors.Errorf(errTooManyComposed, maxComposed)
				}
				all = append(all, obj)
				nested, err := r.nestedXR(ctx, obj)
				if err != nil {
					return nil, err
				}
				if nested != nil {
					next = append(next, nested)
				}
			}
		}
		level = next
	}
	return all, nil
}

// nestedXR reads a composed resource as an XR when an XRD defines its kind;
// nil when none does.
func (r *xrReconciler) nestedXR(ctx context.Context, obj *metav1.PartialObjectMetadata) (*composite.Unstructured, error) {
	gvk := obj.GroupVersionKind()
	m, err := r.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, errors.Wrapf(err, "%s %s", errMapComposed, gvk)
	}
	x := &xpextv2.CompositeResourceDefinition{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: m.Resource.Resource + "." + gvk.Group}, x); err != nil {
		return nil, errors.Wrap(client.IgnoreNotFound(err), errGetXRD)
	}
	xr := composite.New(composite.WithGroupVersionKind(gvk))
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(obj), &xr.Unstructured); err != nil {
		return nil, errors.Wrapf(client.IgnoreNotFound(err), "%s %s %s", errGetComposed, gvk.Kind, obj.GetName())
	}
	return xr, nil
}

// unreadableRef says why the bridge does not read a resource reference a
// tenant may have written, or "" when it may: namespaced XRs compose only
// namespaced resources of their own namespace, of kinds the API serves and
// the bridge may get, list and watch (the cache's informer for a kind it
// may not list would never sync, holding the worker that reads it).
func (r *xrReconciler) unreadableRef(ctx context.Context, xr *composite.Unstructured, ref corev1.ObjectReference) (string, error) {
	if ref.Namespace != "" && ref.Namespace != xr.GetNamespace() {
		return "it is in another namespace", nil
	}
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	m, err := r.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if kmeta.IsNoMatchError(err) {
		return "the API serves no such kind", nil
	}
	if err != nil {
		return "", errors.Wrapf(err, "%s %s", errMapComposed, gvk)
	}
	if m.Scope.Name() != kmeta.RESTScopeNameNamespace {
		return "it is cluster-scoped", nil
	}
	missing, err := r.access.missing(ctx, m.Resource.GroupResource())
	if err != nil {
		return "", err
	}
	if len(missing) > 0 {
		return fmt.Sprintf("the bridge may not %s: grant it with a ClusterRole labelled capxp.dev/aggregate-to-manager: \"true\"", strings.Join(missing, ", ")), nil
	}
	return "", nil
}
