package plan

import (
	"context"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// TestObserveReadsEachKindOnce checks how Observe reads what CAPI's objects
// reference: each kind listed once, by name where it may not be listed, a
// referenced object that is gone left out, and any other failure an error
// naming the kind.
func TestObserveReadsEachKindOnce(t *testing.T) {
	machineXRs := schema.GroupResource{Group: infrav1.GroupVersion.Group, Resource: "crossplanemachines"}
	cases := map[string]struct {
		reason    string
		listErr   error
		wantLists int
		wantGets  int
		wantErr   string
	}{
		"Listed": {
			reason:    "three Machines' XRs are one list, and the XR that is gone is left out",
			wantLists: 1,
		},
		"ListForbidden": {
			reason:    "a kind the reader may not list is read by name, each once",
			listErr:   apierrors.NewForbidden(machineXRs, "", nil),
			wantLists: 1,
			wantGets:  3,
		},
		"ListFails": {
			reason:    "any other failure is an error naming the kind",
			listErr:   apierrors.NewServiceUnavailable("etcd is down"),
			wantLists: 1,
			wantErr:   "cannot list the CrossplaneMachine of namespace " + ns,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha"}}}
			for _, m := range []string{"m-1", "m-2", "m-gone"} {
				objs = append(objs, &clusterv1.Machine{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m},
					Spec: clusterv1.MachineSpec{ClusterName: "alpha", InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.CrossplaneMachineKind, Name: m}},
				})
				if m != "m-gone" {
					objs = append(objs, &infrav1.CrossplaneMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m}})
				}
			}
			isMachineXR := func(o kruntime.Object) bool {
				return strings.HasPrefix(o.GetObjectKind().GroupVersionKind().Kind, infrav1.CrossplaneMachineKind)
			}
			var lists, gets int
			mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{infrav1.GroupVersion})
			mapper.Add(infrav1.GroupVersion.WithKind(infrav1.CrossplaneMachineKind), meta.RESTScopeNamespace)
			c := fake.NewClientBuilder().WithScheme(Scheme()).WithRESTMapper(mapper).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
					if _, ok := l.(*unstructured.UnstructuredList); ok && isMachineXR(l) {
						lists++
						if tc.listErr != nil {
							return tc.listErr
						}
					}
					return c.List(ctx, l, opts...)
				},
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
					if isMachineXR(o) {
						gets++
					}
					return c.Get(ctx, key, o, opts...)
				},
			}).Build()
			o, err := Observe(context.Background(), c, ns)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s: error %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if lists != tc.wantLists || gets != tc.wantGets {
				t.Errorf("%s: %d lists and %d gets of CrossplaneMachines, want %d and %d", tc.reason, lists, gets, tc.wantLists, tc.wantGets)
			}
			var got []string
			for m, xr := range o.InfraMachines {
				if xr.GetName() != m {
					t.Errorf("%s: Machine %s has XR %s", tc.reason, m, xr.GetName())
				}
				got = append(got, m)
			}
			slices.Sort(got)
			if want := []string{"m-1", "m-2"}; !slices.Equal(got, want) {
				t.Errorf("%s: XRs read for Machines %v, want %v", tc.reason, got, want)
			}
		})
	}
}
