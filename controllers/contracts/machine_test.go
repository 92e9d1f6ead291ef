package contracts

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"
	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// The machine gate never opens on a cluster XR it could not read: it would
// compose the machine without the cluster's network and with the
// Composition's default credentials instead of the cluster's, and nothing
// would correct it later.
func TestMachineGateNeedsTheClusterXR(t *testing.T) {
	clusterGVK := infrav1.GroupVersion.WithKind(infrav1.CrossplaneClusterKind)
	clusterXR := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"providerConfigRef": map[string]any{"apiGroup": "aws.m.upbound.io", "kind": "ClusterProviderConfig", "name": "team-a"}},
		"status": map[string]any{"failureDomains": []any{map[string]any{"name": "eu-west-1a", "controlPlane": true}}, "outputs": map[string]any{"network": map[string]any{"id": "vpc-1", "subnets": []any{
			map[string]any{"id": "subnet-a", "failureDomain": "eu-west-1a", "role": "Private"},
		}}}},
	}}
	clusterXR.SetGroupVersionKind(clusterGVK)
	clusterXR.SetNamespace("ns")
	clusterXR.SetName("c")

	// CAPI reads the contract version from the CRD's labels.
	crd := &extv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{
		Name:   "crossplaneclusters." + clusterGVK.Group,
		Labels: map[string]string{infrav1.CAPIContractLabel: clusterGVK.Version},
	}}
	cases := map[string]struct {
		getErr    error
		wantErr   bool
		wantOpen  bool
		wantCreds bool
		// wantReason is the verdict's, when the gate holds.
		wantReason string
		// denied: the API server says the bridge may not read the kind.
		denied bool
	}{
		"Readable": {wantOpen: true, wantCreds: true},
		// Any InfraCluster kind must be granted to the bridge: a clear
		// verdict, not a silent retry.
		"NotGranted":  {denied: true, wantReason: infrav1.ForbiddenReason},
		"Forbidden":   {getErr: apierrors.NewForbidden(schema.GroupResource{Group: clusterGVK.Group, Resource: "crossplaneclusters"}, "c", nil), wantReason: infrav1.ForbiddenReason},
		"Unavailable": {getErr: apierrors.NewServiceUnavailable("etcd is gone"), wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{clusterGVK.GroupVersion()})
			mapper.Add(clusterGVK, meta.RESTScopeNamespace)
			c := fake.NewClientBuilder().WithScheme(scheme()).WithRESTMapper(mapper).WithObjects(clusterXR.DeepCopy(), crd.DeepCopy()).
				WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if tc.getErr != nil && obj.GetObjectKind().GroupVersionKind().Kind == clusterGVK.Kind {
						return tc.getErr
					}
					return c.Get(ctx, key, obj, opts...)
				}}).Build()
			missing := func(context.Context, schema.GroupResource) ([]string, error) {
				if tc.denied {
					return []string{"get", "list", "watch"}, nil
				}
				return nil, nil
			}
			cluster := &clusterv1.Cluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
				Spec:       clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: clusterGVK.Group, Kind: clusterGVK.Kind, Name: "c"}},
				Status: clusterv1.ClusterStatus{
					Initialization: clusterv1.ClusterInitializationStatus{InfrastructureProvisioned: ptr.To(true)},
					FailureDomains: []clusterv1.FailureDomain{{Name: "eu-west-1a", ControlPlane: ptr.To(true)}},
				},
			}
			machine := &clusterv1.Machine{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"},
				Spec: clusterv1.MachineSpec{ClusterName: "c", FailureDomain: "eu-west-1a",
					Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("m-data")}},
			}
			xr := composite.New(composite.WithGroupVersionKind(infrav1.GroupVersion.WithKind(infrav1.CrossplaneMachineKind)))
			xr.SetNamespace("ns")
			xr.SetName("m")
			before := xr.Unstructured.DeepCopy()
			s := &Scope{XR: xr, Owner: machine, Machine: machine, Cluster: cluster}

			v, err := infraMachine{client: c, missing: missing}.Prepare(context.Background(), s)
			if (err != nil) != tc.wantErr {
				t.Fatalf("prepare(...): error %v, want error %v", err, tc.wantErr)
			}
			if open := err == nil && v == nil; open != tc.wantOpen {
				t.Errorf("prepare(...): gate open %v (verdict %+v), want %v", open, v, tc.wantOpen)
			}
			_, creds, _ := unstructured.NestedMap(xr.Object, "spec", "providerConfigRef")
			if creds != tc.wantCreds {
				t.Errorf("prepare(...): spec.providerConfigRef injected %v, want %v", creds, tc.wantCreds)
			}
			if v != nil && v.Reason != tc.wantReason {
				t.Errorf("prepare(...): verdict %+v, want reason %q", v, tc.wantReason)
			}
			if !tc.wantOpen {
				if diff := cmp.Diff(before.Object, xr.Object); diff != "" {
					t.Errorf("prepare(...) changed the XR on error: -before, +after:\n%s", diff)
				}
			}
		})
	}
}

func TestProviderIDTemplate(t *testing.T) {
	machineGVK := infrav1.GroupVersion.WithKind(infrav1.CrossplaneMachineKind)
	comp := func(name, template string, labels map[string]string) *xpextv1.Composition {
		c := &xpextv1.Composition{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: xpextv1.CompositionSpec{CompositeTypeRef: xpextv1.TypeReferenceTo(machineGVK)}}
		if template != "" {
			c.Annotations = map[string]string{infrav1.ProviderIDAnnotation: template}
		}
		return c
	}
	xrd := func(def, enforced string) *xpextv2.CompositeResourceDefinition {
		x := &xpextv2.CompositeResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "crossplanemachines." + machineGVK.Group}}
		x.Spec.Group, x.Spec.Names.Kind = machineGVK.Group, machineGVK.Kind
		if def != "" {
			x.Spec.DefaultCompositionRef = &xpextv2.CompositionReference{Name: def}
		}
		if enforced != "" {
			x.Spec.EnforcedCompositionRef = &xpextv2.CompositionReference{Name: enforced}
		}
		return x
	}
	local := map[string]string{"capxp.dev/backend": "local"}
	xr := func(edit func(*composite.Unstructured)) *composite.Unstructured {
		u := composite.New(composite.WithGroupVersionKind(machineGVK))
		u.SetName("m-1")
		if edit != nil {
			edit(u)
		}
		return u
	}
	selecting := func(u *composite.Unstructured) { u.SetCompositionSelector(&metav1.LabelSelector{MatchLabels: local}) }
	cases := map[string]struct {
		reason       string
		objs         []client.Object
		xr           *composite.Unstructured
		want, wantBy string
	}{
		"Referenced": {
			reason: "the Composition the XR names",
			objs:   []client.Object{xrd("", ""), comp("a", "x:///{metadata.name}", nil), comp("b", "y:///{metadata.name}", nil)},
			xr:     xr(func(u *composite.Unstructured) { u.SetCompositionReference(&corev1.ObjectReference{Name: "b"}) }),
			want:   "y:///{metadata.name}", wantBy: "Composition b",
		},
		"Enforced": {
			reason: "the XRD's enforced Composition wins over the XR's reference, as in Crossplane",
			objs:   []client.Object{xrd("", "a"), comp("a", "x:///{metadata.name}", nil), comp("b", "y:///{metadata.name}", nil)},
			xr:     xr(func(u *composite.Unstructured) { u.SetCompositionReference(&corev1.ObjectReference{Name: "b"}) }),
			want:   "x:///{metadata.name}", wantBy: "Composition a",
		},
		"SelectedAgree": {
			reason: "every Composition of the kind the selector matches declares the same template",
			objs: []client.Object{xrd("", ""), comp("l1", "x:///{metadata.name}", local), comp("l2", "x:///{metadata.name}", local),
				comp("aws", "", map[string]string{"capxp.dev/backend": "aws"})},
			xr:   xr(selecting),
			want: "x:///{metadata.name}", wantBy: "Compositions l1, l2",
		},
		"SelectedDisagree": {
			reason: "Crossplane takes any one of the matches: if they differ, nothing can be known before composing",
			objs:   []client.Object{xrd("", ""), comp("l1", "x:///{metadata.name}", local), comp("l2", "y:///{metadata.name}", local)},
			xr:     xr(selecting),
		},
		"SelectedOneDeclaresNone": {
			reason: "one match without a template is a disagreement too",
			objs:   []client.Object{xrd("", ""), comp("l1", "x:///{metadata.name}", local), comp("l2", "", local)},
			xr:     xr(selecting),
		},
		"SelectedOtherKind": {
			reason: "Compositions of another kind are not candidates, whatever their labels",
			objs: []client.Object{xrd("", ""), comp("l1", "x:///{metadata.name}", local), func() client.Object {
				c := comp("pool", "z:///{metadata.name}", local)
				c.Spec.CompositeTypeRef.Kind = infrav1.CrossplaneMachinePoolKind
				return c
			}()},
			xr:   xr(selecting),
			want: "x:///{metadata.name}", wantBy: "Composition l1",
		},
		"SelectedNone": {
			reason: "no match: Crossplane says so on the XR",
			objs:   []client.Object{xrd("", ""), comp("aws", "x:///{metadata.name}", map[string]string{"capxp.dev/backend": "aws"})},
			xr:     xr(selecting),
		},
		"Default": {
			reason: "without a reference or a selector, the XRD's default",
			objs:   []client.Object{xrd("a", ""), comp("a", "x:///{metadata.name}", nil)},
			xr:     xr(nil),
			want:   "x:///{metadata.name}", wantBy: "Composition a",
		},
		"ReferencedMissing": {
			reason: "a reference to a Composition that does not exist: Crossplane says so on the XR",
			objs:   []client.Object{xrd("", "")},
			xr:     xr(func(u *composite.Unstructured) { u.SetCompositionReference(&corev1.ObjectReference{Name: "gone"}) }),
		},
		"HasProviderID": {
			reason: "an XR with a provider ID keeps it",
			objs:   []client.Object{xrd("a", ""), comp("a", "x:///{metadata.name}", nil)},
			xr:     xr(func(u *composite.Unstructured) { u.Object["spec"] = map[string]any{"providerID": "byo://h"} }),
		},
		"ComposedBefore": {
			reason: "an XR whose gate opened before has its Composition's report",
			objs:   []client.Object{xrd("a", ""), comp("a", "x:///{metadata.name}", nil)},
			xr: xr(func(u *composite.Unstructured) {
				u.Object["spec"] = map[string]any{"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}}}
			}),
		},
		"NotServed": {
			reason: "a kind the API server does not serve has no XRD: its reference alone",
			objs:   []client.Object{comp("a", "x:///{metadata.name}", nil)},
			xr: xr(func(u *composite.Unstructured) {
				u.SetGroupVersionKind(schema.GroupVersionKind{Group: "other.example.org", Version: "v1", Kind: "XMachine"})
				u.SetCompositionReference(&corev1.ObjectReference{Name: "a"})
			}),
			want: "x:///{metadata.name}", wantBy: "Composition a",
		},
		"NoXRD": {
			reason: "a kind that is a CRD of its own: its reference alone",
			objs:   []client.Object{comp("a", "x:///{metadata.name}", nil)},
			xr:     xr(func(u *composite.Unstructured) { u.SetCompositionReference(&corev1.ObjectReference{Name: "a"}) }),
			want:   "x:///{metadata.name}", wantBy: "Composition a",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// The XR kind is served: its XRD is found by its resource's name.
			mapper := meta.NewDefaultRESTMapper(nil)
			mapper.Add(machineGVK, meta.RESTScopeNamespace)
			c := fake.NewClientBuilder().WithScheme(scheme()).WithRESTMapper(mapper).WithObjects(tc.objs...).Build()
			got, by, err := providerIDTemplate(t.Context(), c, tc.xr)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || by != tc.wantBy {
				t.Errorf("%s\nproviderIDTemplate() = %q, %q; want %q, %q", tc.reason, got, by, tc.want, tc.wantBy)
			}
		})
	}
}
