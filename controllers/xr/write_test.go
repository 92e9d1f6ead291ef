package xr

import (
	"context"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/capxp/cluster-api-provider-crossplane/controllers/apply"
)

func TestPatchIfChangedSendsAPatchOnce(t *testing.T) {
	xr := func(rv string, spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "XMachine"})
		u.SetNamespace("ns")
		u.SetName("m")
		u.SetUID("u1")
		u.SetResourceVersion(rv)
		return u
	}
	setID := func(id string) func(*unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, id, "spec", "providerID")
		}
	}
	cases := map[string]struct {
		reason string
		// The object as the second reconcile reads it: its version
		// relative to the first patch's, and its spec.
		second      func(made int) *unstructured.Unstructured
		secondWants func(*unstructured.Unstructured)
		patches     int
	}{
		"CacheBehind": {
			reason:      "a cache that does not show the patch yet gets no second one",
			second:      func(int) *unstructured.Unstructured { return xr("", map[string]any{}) },
			secondWants: setID("a"),
			patches:     1,
		},
		"CacheBehindAnotherChange": {
			reason:      "a cache behind the patch gets a patch that changes something else",
			second:      func(int) *unstructured.Unstructured { return xr("", map[string]any{}) },
			secondWants: setID("b"),
			patches:     2,
		},
		"UndoneSince": {
			reason:      "someone removed what was patched after the patch: it is sent again",
			second:      func(made int) *unstructured.Unstructured { return xr(strconv.Itoa(made+1), map[string]any{}) },
			secondWants: setID("a"),
			patches:     2,
		},
		"CaughtUp": {
			reason: "a cache that shows the patch has nothing to send",
			second: func(made int) *unstructured.Unstructured {
				return xr(strconv.Itoa(made), map[string]any{"providerID": "a"})
			},
			secondWants: setID("a"),
			patches:     1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			patches := 0
			c := fake.NewClientBuilder().WithObjects(xr("", map[string]any{})).WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
					patches++
					return c.Patch(ctx, obj, p, opts...)
				},
			}).Build()
			stale := &unstructured.Unstructured{}
			stale.SetGroupVersionKind(xr("", nil).GroupVersionKind())
			if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "m"}, stale); err != nil {
				t.Fatal(err)
			}
			w := &memory{}
			first := stale.DeepCopy()
			if err := apply.PatchIfChanged(t.Context(), c, w, first, setID("a")); err != nil {
				t.Fatal(err)
			}
			made, _ := strconv.Atoi(first.GetResourceVersion())
			second := tc.second(made)
			if second.GetResourceVersion() == "" {
				second = stale.DeepCopy()
			}
			if err := apply.PatchIfChanged(t.Context(), c, w, second, tc.secondWants); err != nil {
				t.Fatal(err)
			}
			if patches != tc.patches {
				t.Errorf("%s: %d patches, want %d", tc.reason, patches, tc.patches)
			}
		})
	}
}
