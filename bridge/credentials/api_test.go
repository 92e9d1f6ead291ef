package credentials

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// A Secret found to exist is trusted for RecheckSecretAfter: an XR that uses
// it is reconciled many times, and each would read it again.
func TestSecretIsReadAgainOnlyAfterTheRecheckInterval(t *testing.T) {
	cfg := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"credentials": map[string]any{
		"source": "Secret", "secretRef": map[string]any{"name": "creds", "key": "credentials"},
	}}}}
	ref := &infrav1.ProviderConfigReference{Kind: infrav1.ProviderConfigKindNamespaced, Name: "team-a"}
	cases := map[string]struct {
		exists bool
		// after is how long after the first check the second one runs.
		after     time.Duration
		wantReads int
		wantOK    bool
	}{
		"FoundThenWithinTheInterval": {exists: true, after: RecheckSecretAfter - time.Second, wantReads: 1, wantOK: true},
		"FoundThenAfterTheInterval":  {exists: true, after: RecheckSecretAfter, wantReads: 2, wantOK: true},
		"MissingIsAlwaysReadAgain":   {exists: false, after: time.Second, wantReads: 2, wantOK: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var objs []client.Object
			if tc.exists {
				objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "creds"}})
			}
			reads := 0
			c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					reads++
					return c.Get(ctx, key, obj, opts...)
				},
			}).Build()
			now := time.Now()
			r := NewAPIResolver(c, c)
			r.now = func() time.Time { return now }
			for range 2 {
				_, ok, err := r.secret(t.Context(), cfg, ref, "team-a")
				if err != nil {
					t.Fatal(err)
				}
				if ok != tc.wantOK {
					t.Errorf("secret() ok = %v, want %v", ok, tc.wantOK)
				}
				now = now.Add(tc.after)
			}
			if reads != tc.wantReads {
				t.Errorf("Secret reads = %d, want %d", reads, tc.wantReads)
			}
		})
	}
}
