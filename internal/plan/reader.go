package plan

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// errWrite is what plan answers a write with: CAPI's rules are given a
// client, and plan never writes.
var errWrite = errors.New("capxp plan never writes to the cluster")

// proposedFirst is the cluster as it will be once the change is applied,
// read-only: a Get returns the proposed object where the change has one,
// the live one otherwise; every write fails.
type proposedFirst struct {
	client.Client
	proposed map[schema.GroupKind]map[client.ObjectKey]*unstructured.Unstructured
}

func (r proposedFirst) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		// A typed object new from its type (CAPI's generator reads so)
		// carries no kind: the scheme knows it.
		var err error
		if gvk, err = apiutil.GVKForObject(obj, r.Scheme()); err != nil {
			return errors.Wrapf(err, "cannot tell the kind of %T", obj)
		}
	}
	p, ok := r.proposed[gvk.GroupKind()][key]
	if !ok {
		return r.Client.Get(ctx, key, obj, opts...)
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.Object = p.DeepCopy().Object
		return nil
	}
	return errors.Wrapf(runtime.DefaultUnstructuredConverter.FromUnstructured(p.DeepCopy().Object, obj), "cannot read the proposed %s %s", gvk.Kind, key)
}

// List lists live, with each listed object the change proposes in its
// proposed form (an object the change creates is not added: a list is
// what the hooks read of objects that exist).
func (r proposedFirst) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	l, ok := list.(*unstructured.UnstructuredList)
	if !ok {
		return nil
	}
	for i := range l.Items {
		item := &l.Items[i]
		if p, ok := r.proposed[item.GroupVersionKind().GroupKind()][client.ObjectKeyFromObject(item)]; ok {
			item.Object = p.DeepCopy().Object
		}
	}
	return nil
}

func (proposedFirst) Create(context.Context, client.Object, ...client.CreateOption) error {
	return errWrite
}

func (proposedFirst) Delete(context.Context, client.Object, ...client.DeleteOption) error {
	return errWrite
}

func (proposedFirst) Update(context.Context, client.Object, ...client.UpdateOption) error {
	return errWrite
}

func (proposedFirst) Patch(context.Context, client.Object, client.Patch, ...client.PatchOption) error {
	return errWrite
}

func (proposedFirst) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return errWrite
}

func (proposedFirst) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return errWrite
}

func (proposedFirst) Status() client.SubResourceWriter { return noSubResource{} }

func (proposedFirst) SubResource(string) client.SubResourceClient { return noSubResource{} }

// noSubResource refuses every subresource call.
type noSubResource struct{}

func (noSubResource) Get(context.Context, client.Object, client.Object, ...client.SubResourceGetOption) error {
	return errWrite
}

func (noSubResource) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return errWrite
}

func (noSubResource) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	return errWrite
}

func (noSubResource) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return errWrite
}

func (noSubResource) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return errWrite
}
