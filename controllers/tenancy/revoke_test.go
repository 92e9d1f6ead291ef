package tenancy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A revocation lists first the kinds the namespace's XRs compose, so that
// what they composed is paused before the budget's rate applies; every
// kind is still listed, each part in its own order.
func TestComposedFirst(t *testing.T) {
	object := schema.GroupVersionKind{Group: "kubernetes.m.crossplane.io", Version: "v1alpha2", Kind: "Object"}
	bucket := schema.GroupVersionKind{Group: "s3.aws.m.upbound.io", Version: "v1beta1", Kind: "Bucket"}
	instance := schema.GroupVersionKind{Group: "ec2.aws.m.upbound.io", Version: "v1beta1", Kind: "Instance"}
	vpc := schema.GroupVersionKind{Group: "ec2.aws.m.upbound.io", Version: "v1beta1", Kind: "VPC"}
	all := []schema.GroupVersionKind{bucket, instance, object, vpc}
	cases := map[string]struct {
		first map[schema.GroupKind]bool
		want  []schema.GroupVersionKind
	}{
		"nothing composed: the kinds' own order": {want: all},
		"one kind composed goes first": {
			first: map[schema.GroupKind]bool{object.GroupKind(): true},
			want:  []schema.GroupVersionKind{object, bucket, instance, vpc},
		},
		"several composed keep their order among themselves": {
			first: map[schema.GroupKind]bool{vpc.GroupKind(): true, instance.GroupKind(): true},
			want:  []schema.GroupVersionKind{instance, vpc, bucket, object},
		},
		"a composed kind no provider serves adds nothing": {
			first: map[schema.GroupKind]bool{{Group: "made.up", Kind: "Thing"}: true, bucket.GroupKind(): true},
			want:  all,
		},
		"composed in another version is the same kind": {
			first: map[schema.GroupKind]bool{{Group: vpc.Group, Kind: vpc.Kind}: true},
			want:  []schema.GroupVersionKind{vpc, bucket, instance, object},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var kinds []managedKind
			for _, gvk := range all {
				kinds = append(kinds, managedKind{gvk: gvk})
			}
			var got []schema.GroupVersionKind
			for _, k := range composedFirst(kinds, tc.first) {
				got = append(got, k.gvk)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("composedFirst (-want +got):\n%s", diff)
			}
		})
	}
}
