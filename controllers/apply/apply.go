// Package apply holds the writes every controller of the manager shares for
// the objects it maintains whole (admission policies, webhook
// configurations): a server-side apply under the bridge's field manager,
// sent only when the live object does not already hold every field.
package apply

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/controllers/composed"
)

// Policy applies a policy and its binding, or deletes both (binding
// first) when none.
func Policy(ctx context.Context, c client.Client, live client.Reader, objs []client.Object, none bool) error {
	if none {
		for i := len(objs) - 1; i >= 0; i-- {
			if err := client.IgnoreNotFound(c.Delete(ctx, objs[i])); err != nil {
				return errors.Wrapf(err, "cannot delete %s", objs[i].GetName())
			}
		}
		return nil
	}
	for _, o := range objs {
		u, err := ToUnstructured(c, o)
		if err != nil {
			return err
		}
		if err := IfChanged(ctx, c, live, u); err != nil {
			return err
		}
	}
	return nil
}

// IfChanged server-side applies u under the bridge's field manager
// unless the live object already holds every field u sets. An apply that
// changes nothing is still a write, and every replica that starts, or takes
// the lease over, would make it again. The live object is read with
// reader, uncached: the manager may get these objects, not watch them.
func IfChanged(ctx context.Context, c client.Client, reader client.Reader, u *unstructured.Unstructured) error {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(u.GroupVersionKind())
	err := reader.Get(ctx, client.ObjectKeyFromObject(u), live)
	switch {
	case err == nil && holds(live.Object, u.Object):
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return errors.Wrapf(err, "cannot get %s %s", u.GetKind(), u.GetName())
	}
	return errors.Wrapf(c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(composed.FieldManager), client.ForceOwnership),
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

// ToUnstructured converts a typed object, whose kind the client's scheme
// knows, for the status apply helpers.
func ToUnstructured(c client.Client, obj client.Object) (*unstructured.Unstructured, error) {
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
