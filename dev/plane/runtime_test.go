package plane

import (
	"testing"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestApplyProviderService(t *testing.T) {
	revision := func(name, provider string) *pkgv1.ProviderRevision {
		rev := &pkgv1.ProviderRevision{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if provider != "" {
			rev.SetLabels(map[string]string{pkgv1.LabelParentPackage: provider})
		}
		return rev
	}
	ports := []corev1.ServicePort{{Name: "webhook", Protocol: corev1.ProtocolTCP, Port: 9443, TargetPort: intstr.FromString("webhook")}}
	cases := map[string]struct {
		// revisions are applied in turn; the Service after the last one.
		revisions []*pkgv1.ProviderRevision
		selector  map[string]string
		wantErr   string
	}{
		"a new Provider": {
			revisions: []*pkgv1.ProviderRevision{revision("capxp-1", "capxp")},
			selector:  map[string]string{"pkg.crossplane.io/revision": "capxp-1", "pkg.crossplane.io/provider": "capxp"},
		},
		"an upgrade selects the active revision's pods": {
			revisions: []*pkgv1.ProviderRevision{revision("capxp-1", "capxp"), revision("capxp-2", "capxp")},
			selector:  map[string]string{"pkg.crossplane.io/revision": "capxp-2", "pkg.crossplane.io/provider": "capxp"},
		},
		"a revision without its Provider's label": {
			revisions: []*pkgv1.ProviderRevision{revision("capxp-1", "")},
			wantErr:   "ProviderRevision capxp-1 has no pkg.crossplane.io/package label",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := runtime.NewScheme()
			if err := corev1.AddToScheme(s); err != nil {
				t.Fatal(err)
			}
			p := &Plane{client: fake.NewClientBuilder().WithScheme(s).Build()}
			var err error
			for _, rev := range tc.revisions {
				err = p.applyProviderService(t.Context(), rev, rev.GetLabels()[pkgv1.LabelParentPackage])
			}
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("applyProviderService: %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			svc := &corev1.Service{}
			if err := p.client.Get(t.Context(), client.ObjectKey{Namespace: crossplaneNamespace, Name: "capxp"}, svc); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.selector, svc.Spec.Selector); d != "" {
				t.Errorf("selector (-want +got):\n%s", d)
			}
			if d := cmp.Diff(ports, svc.Spec.Ports); d != "" {
				t.Errorf("ports (-want +got):\n%s", d)
			}
		})
	}
}
