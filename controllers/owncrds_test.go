package controllers

import (
	"context"
	"io/fs"
	"path"
	"strconv"
	"sync"
	"testing"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
)

// TestOwnCRDLabels checks that the labels the manager restores are those the
// shipped CRDs carry, for every shipped CRD and no other.
func TestOwnCRDLabels(t *testing.T) {
	files, err := fs.Glob(capxp.Manifests, path.Join(capxp.CRDsDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := OwnCRDLabels()
	seen := map[string]bool{}
	for _, f := range files {
		raw, err := fs.ReadFile(capxp.Manifests, f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &extv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			t.Fatal(err)
		}
		seen[crd.Name] = true
		restores, ok := want[crd.Name]
		if !ok {
			t.Errorf("shipped CRD %s: OwnCRDLabels does not restore its labels", crd.Name)
			continue
		}
		if !labels.SelectorFromSet(restores).Matches(labels.Set(crd.Labels)) {
			t.Errorf("shipped CRD %s carries %v, but OwnCRDLabels restores %v", crd.Name, crd.Labels, restores)
		}
	}
	for n := range want {
		if !seen[n] {
			t.Errorf("OwnCRDLabels names %s, which is not a shipped CRD", n)
		}
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
			c := fake.NewClientBuilder().WithScheme(NewScheme()).WithObjects(cached.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
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
