package xr

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestMovable: only the CRDs of managed and composite resources are
// labelled for clusterctl move; a kind a tenant can create and name in its
// XR's resourceRefs (a ProviderConfig) is not.
func TestMovable(t *testing.T) {
	k8s := schema.GroupVersion{Group: "kubernetes.m.crossplane.io", Version: "v1alpha1"}
	served := map[string][]string{
		"Object":         {"crossplane", "managed", "kubernetes"},
		"ProviderConfig": {"crossplane", "provider", "kubernetes"},
	}
	cases := map[string]struct {
		gvk        schema.GroupVersionKind
		categories func(schema.GroupVersion) (map[string][]string, error)
		want       bool
		wantErr    bool
	}{
		"ManagedResource": {gvk: k8s.WithKind("Object"), want: true},
		"CompositeResource": {gvk: schema.GroupVersionKind{Group: "platform.example.org", Version: "v1", Kind: "VM"},
			categories: func(schema.GroupVersion) (map[string][]string, error) {
				return map[string][]string{"VM": {"composite"}}, nil
			}, want: true},
		"ProviderConfig":   {gvk: k8s.WithKind("ProviderConfig")},
		"UnknownKind":      {gvk: k8s.WithKind("Nothing")},
		"NoDiscovery":      {gvk: k8s.WithKind("Object"), categories: nil},
		"DiscoveryFailure": {gvk: k8s.WithKind("Object"), categories: func(schema.GroupVersion) (map[string][]string, error) { return nil, errors.New("boom") }, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := &crdLabels{categories: tc.categories}
			if tc.categories == nil && name != "NoDiscovery" {
				l.categories = func(schema.GroupVersion) (map[string][]string, error) { return served, nil }
			}
			got, err := l.movable(tc.gvk)
			if (err != nil) != tc.wantErr {
				t.Fatalf("movable(%s): %v, want error %t", tc.gvk, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("movable(%s) = %t, want %t", tc.gvk, got, tc.want)
			}
		})
	}
}

// TestCRDLabelledOnce labels one CRD from XRs reconciled at once, over a
// cache that does not show the label yet: one write.
func TestCRDLabelledOnce(t *testing.T) {
	cached := &extv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "objects.example.org", UID: "c1", ResourceVersion: "10"}}
	cases := map[string]struct {
		reason string
		// cached is what the cache shows the nth read.
		cached  func(m *metav1.PartialObjectMetadata, n int)
		applies int
	}{
		"CacheBehind": {
			reason:  "the cache keeps showing the CRD without the label",
			cached:  func(*metav1.PartialObjectMetadata, int) {},
			applies: 1,
		},
		"RemovedSince": {
			reason: "someone removed the label after it was applied: it is applied again",
			cached: func(m *metav1.PartialObjectMetadata, n int) {
				if n > 0 {
					m.SetResourceVersion("1000")
				}
			},
			applies: 2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			applies, reads := 0, 0
			c := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(cached.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(_ context.Context, _ client.WithWatch, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
					m := obj.(*metav1.PartialObjectMetadata)
					m.ObjectMeta = *cached.ObjectMeta.DeepCopy()
					tc.cached(m, reads)
					reads++
					return nil
				},
				Apply: func(_ context.Context, _ client.WithWatch, obj runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
					mu.Lock()
					defer mu.Unlock()
					applies++
					// The server's answer, written back into the applied object.
					obj.(interface{ SetResourceVersion(string) }).SetResourceVersion(strconv.Itoa(10 + applies))
					return nil
				},
			}).Build()
			l := &crdLabels{}
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					if _, err := l.label(t.Context(), c, cached.Name, map[string]string{"clusterctl.cluster.x-k8s.io": ""}, moveFieldOwner); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if applies != tc.applies {
				t.Errorf("%s: %d applies, want %d", tc.reason, applies, tc.applies)
			}
		})
	}
}
