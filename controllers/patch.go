package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// patchIfChanged applies mutate to a copy of obj and, if that changed
// anything, sends the difference as a merge patch under the bridge's field
// manager. On success obj holds the result. A merge patch replaces a list
// whole, so a patch that changes the finalizers is guarded by obj's resource
// version, and so is one that holds, releases or pauses it; one that sets
// only other map keys (annotations, spec fields the bridge owns) is not, and a status write someone made since the read does not
// make it fail. With w, a patch is not sent again over a cache that does not
// show it yet (a reconcile woken by another kind's informer may read the
// object from one behind): what it writes is already there.
func patchIfChanged(ctx context.Context, c client.Client, w *memory, obj *unstructured.Unstructured, mutate func(*unstructured.Unstructured)) error {
	want := obj.DeepCopy()
	mutate(want)
	return patchTo(ctx, c, w, obj, want)
}

// pauseChanged reports whether want holds, releases or pauses obj: a
// decision taken on obj as read, which must not land on a newer version
// (one whose credentials reference a tenant changed since).
func pauseChanged(obj, want *unstructured.Unstructured) bool {
	a, b := obj.GetAnnotations(), want.GetAnnotations()
	for _, k := range []string{infrav1.CrossplanePausedAnnotation, infrav1.CredentialsHoldAnnotation} {
		if a[k] != b[k] {
			return true
		}
	}
	return false
}

// patchTo is patchIfChanged for a caller that holds the object it wants
// already: want, which the patch's answer overwrites.
func patchTo(ctx context.Context, c client.Client, w *memory, obj, want *unstructured.Unstructured) error {
	if equality.Semantic.DeepEqual(obj.Object, want.Object) {
		return nil
	}
	var opts []client.MergeFromOption
	if !equality.Semantic.DeepEqual(obj.GetFinalizers(), want.GetFinalizers()) || pauseChanged(obj, want) {
		opts = append(opts, client.MergeFromWithOptimisticLock{})
	}
	patch := client.MergeFromWithOptions(obj, opts...)
	data, err := patch.Data(want)
	if err != nil {
		return errors.Wrap(err, errPatch)
	}
	if w != nil && w.already(obj, partPatch, string(data)) {
		return nil
	}
	ctrl.LoggerFrom(ctx).V(4).Info("Patching", "kind", obj.GetKind(), "name", obj.GetName(), "patch", string(data))
	if err := c.Patch(ctx, want, patch, client.FieldOwner(fieldManager)); err != nil {
		return errors.Wrap(err, errPatch)
	}
	if w != nil {
		w.record(obj, want.GetResourceVersion(), partPatch, string(data))
	}
	obj.Object = want.Object
	return nil
}

// applyIfChanged server-side applies u under the bridge's field manager
// unless the live object already holds every field u sets. An apply that
// changes nothing is still a write, and every replica that starts, or takes
// the lease over, would make it again. The live object is read with
// reader, uncached: the manager may get these objects, not watch them.
func applyIfChanged(ctx context.Context, c client.Client, reader client.Reader, u *unstructured.Unstructured) error {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(u.GroupVersionKind())
	err := reader.Get(ctx, client.ObjectKeyFromObject(u), live)
	switch {
	case err == nil && holds(live.Object, u.Object):
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return errors.Wrapf(err, "cannot get %s %s", u.GetKind(), u.GetName())
	}
	return errors.Wrapf(c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership),
		"cannot apply %s %s", u.GetKind(), u.GetName())
}

// holds reports whether live has every field want sets, with the same
// value: the API server's defaults may add fields, never change those set.
// Lists match element by element; a null in want sets nothing.
func holds(live, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			lv, found := l[k]
			if v == nil && !found {
				continue
			}
			if !found || !holds(lv, v) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(w) {
			return false
		}
		for i := range w {
			if !holds(l[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return equality.Semantic.DeepEqual(live, want)
	}
}

// toUnstructured converts a typed object, whose kind the client's scheme
// knows, for the status apply helpers.
func toUnstructured(c client.Client, obj client.Object) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return nil, errors.Wrap(err, "cannot determine the object's kind")
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, errors.Wrap(err, "cannot convert object")
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
