package access

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestReadAccess(t *testing.T) {
	gr := schema.GroupResource{Group: "kubernetes.m.crossplane.io", Resource: "providerconfigs"}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		reason string
		// allowed answers each review.
		allowed func(verb string) bool
		// callers ask at once, then again after later.
		callers int
		later   time.Duration
		want    []string
		reviews int32
	}{
		"AllowedOnce": {
			reason:  "Reconciles that ask at once share one review per verb; an allowed resource is never asked again.",
			allowed: func(string) bool { return true },
			callers: 8, later: 2 * RecheckAfter,
			reviews: 3,
		},
		"DeniedRemembered": {
			reason:  "A denied verb is named, and remembered until the recheck.",
			allowed: func(v string) bool { return v != "watch" },
			callers: 8, later: RecheckAfter / 2,
			want:    []string{"watch providerconfigs.kubernetes.m.crossplane.io"},
			reviews: 3,
		},
		"DeniedRechecked": {
			reason:  "After the recheck interval a denied resource is asked again: a grant changes no object the bridge watches.",
			allowed: func(v string) bool { return v != "list" },
			callers: 4, later: RecheckAfter + time.Second,
			want:    []string{"list providerconfigs.kubernetes.m.crossplane.io"},
			reviews: 6,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var reviews atomic.Int32
			// Every review waits until all callers asked, so that they
			// overlap as a burst of reconciles does.
			gate := make(chan struct{})
			c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
					r := obj.(*authorizationv1.SelfSubjectAccessReview)
					reviews.Add(1)
					<-gate
					r.Status.Allowed = tc.allowed(r.Spec.ResourceAttributes.Verb)
					return nil
				},
			}).Build()
			a := NewReads(c)
			clock := now
			a.now = func() time.Time { return clock }
			var wg sync.WaitGroup
			got := make([][]string, tc.callers)
			for i := range tc.callers {
				wg.Go(func() {
					m, err := a.Missing(t.Context(), gr)
					if err != nil {
						t.Error(err)
					}
					got[i] = m
				})
			}
			time.Sleep(50 * time.Millisecond)
			close(gate)
			wg.Wait()
			for i, m := range got {
				if diff := cmp.Diff(tc.want, m); diff != "" {
					t.Errorf("%s\ncaller %d: -want +got:\n%s", tc.reason, i, diff)
				}
			}
			clock = clock.Add(tc.later)
			if m, err := a.Missing(t.Context(), gr); err != nil || cmp.Diff(tc.want, m) != "" {
				t.Errorf("%s\nlater: %v, %v; want %v", tc.reason, m, err, tc.want)
			}
			if n := reviews.Load(); n != tc.reviews {
				t.Errorf("%s\n%d reviews, want %d", tc.reason, n, tc.reviews)
			}
		})
	}
}
