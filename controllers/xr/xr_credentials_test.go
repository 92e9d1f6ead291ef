package xr

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestReferencing covers which XRs a credentials event wakes: the index
// keys each query names, across namespaces or in one.
func TestReferencing(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "CrossplaneCluster"}
	xr := func(ns, name string, ref ...string) client.Object {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(ns)
		u.SetName(name)
		if len(ref) == 3 {
			u.Object["spec"] = map[string]any{"providerConfigRef": map[string]any{"apiGroup": ref[0], "kind": ref[1], "name": ref[2]}}
		}
		return u
	}
	objs := []client.Object{
		xr("team-a", "aws-default", "aws.m.upbound.io", "ProviderConfig", "default"),
		xr("team-a", "aws-shared", "aws.m.upbound.io", "ClusterProviderConfig", "shared"),
		xr("team-b", "aws-shared", "aws.m.upbound.io", "ClusterProviderConfig", "shared"),
		xr("team-b", "k8s-default", "kubernetes.m.crossplane.io", "ProviderConfig", "default"),
		xr("team-a", "none"),
	}
	cases := map[string]struct {
		reason    string
		namespace string
		key       string
		want      []string
	}{
		"ConfigInNamespace": {
			reason:    "a namespaced config's event wakes the XRs of its namespace that name its kind and name",
			namespace: "team-a", key: refKind("aws.m.upbound.io", "ProviderConfig", "default"),
			want: []string{"team-a/aws-default"},
		},
		"GrantOfAConfig": {
			reason: "a grant of a config wakes every namespace's XRs that name its group and name, of either kind",
			key:    refName("aws.m.upbound.io", "shared"),
			want:   []string{"team-a/aws-shared", "team-b/aws-shared"},
		},
		"GrantOfASource": {
			reason: "a grant of an ambient source wakes every XR naming credentials of its group",
			key:    refGroup("aws.m.upbound.io"),
			want:   []string{"team-a/aws-default", "team-a/aws-shared", "team-b/aws-shared"},
		},
		"Namespace": {
			reason:    "a namespace relabelled wakes its XRs that name credentials, and no other",
			namespace: "team-b", key: refAny,
			want: []string{"team-b/aws-shared", "team-b/k8s-default"},
		},
		"NoneNamed": {
			reason: "a config no XR names wakes none",
			key:    refKind("aws.m.upbound.io", "ProviderConfig", "other"),
		},
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	c := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(objs...).
		WithIndex(obj, providerConfigRefIndex, indexProviderConfigRef).Build()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, r := range referencing(t.Context(), c, gvk, tc.namespace, tc.key) {
				got = append(got, r.String())
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("%s\nreferencing: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
