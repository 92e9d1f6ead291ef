package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// patchIfChanged applies mutate to a copy of obj and, if that changed
// anything, sends the difference as a merge patch under the bridge's field
// manager. On success obj holds the result. A merge patch replaces a list
// whole, so a patch that changes the finalizers is guarded by obj's resource
// version; one that sets only map keys (annotations, spec fields the bridge
// owns) is not, and a status write someone made since the read does not
// make it fail.
func patchIfChanged(ctx context.Context, c client.Client, obj *unstructured.Unstructured, mutate func(*unstructured.Unstructured)) error {
	want := obj.DeepCopy()
	mutate(want)
	if equality.Semantic.DeepEqual(obj.Object, want.Object) {
		return nil
	}
	var opts []client.MergeFromOption
	if !equality.Semantic.DeepEqual(obj.GetFinalizers(), want.GetFinalizers()) {
		opts = append(opts, client.MergeFromWithOptimisticLock{})
	}
	patch := client.MergeFromWithOptions(obj, opts...)
	if log := ctrl.LoggerFrom(ctx).V(4); log.Enabled() {
		data, _ := patch.Data(want)
		log.Info("Patching", "kind", obj.GetKind(), "name", obj.GetName(), "patch", string(data))
	}
	if err := c.Patch(ctx, want, patch, client.FieldOwner(fieldManager)); err != nil {
		return errors.Wrap(err, errPatch)
	}
	obj.Object = want.Object
	return nil
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
