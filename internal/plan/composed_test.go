package plan

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/internal/render"
)

func composed(resource, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("kubernetes.m.crossplane.io/v1alpha1")
	u.SetKind("Object")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetAnnotations(map[string]string{annotationResourceName: resource})
	return u
}

func TestDiffComposed(t *testing.T) {
	cases := map[string]struct {
		observed, desired []*unstructured.Unstructured
		want              []ComposedChange
	}{
		"Same": {
			observed: []*unstructured.Unstructured{composed("node", "n-1", map[string]any{"replicas": int64(2)})},
			// The pipeline's numbers are floats.
			desired: []*unstructured.Unstructured{composed("node", "", map[string]any{"replicas": float64(2)})},
		},
		"FieldsTheCompositionSetsChange": {
			observed: []*unstructured.Unstructured{composed("node", "n-1", map[string]any{"size": "small", "zone": "a", "set": "by the provider"})},
			desired:  []*unstructured.Unstructured{composed("node", "", map[string]any{"size": "large", "zone": "a"})},
			want:     []ComposedChange{{Resource: "node", Kind: "Object", Name: "n-1", Action: Changed, Fields: []string{"spec.size"}}},
		},
		"CreatedAndDeleted": {
			observed: []*unstructured.Unstructured{composed("node", "n-1", nil)},
			desired:  []*unstructured.Unstructured{composed("host", "", nil)},
			want: []ComposedChange{
				{Resource: "host", Kind: "Object", Action: Created},
				{Resource: "node", Kind: "Object", Name: "n-1", Action: Deleted},
			},
		},
		"AFieldCrossplaneSetIsRemoved": {
			observed: []*unstructured.Unstructured{func() *unstructured.Unstructured {
				u := composed("node", "n-1", map[string]any{"size": "small", "zone": "a"})
				u.SetLabels(map[string]string{"capxp.dev/planned": "yes", "theirs": "x"})
				u.SetManagedFields([]metav1.ManagedFieldsEntry{
					{Manager: "apiextensions.crossplane.io/composed/0a1b2c", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
						FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:capxp.dev/planned":{}}},"f:spec":{"f:size":{},"f:zone":{}}}`)},
					// Another writer's fields are not Crossplane's to remove.
					{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
						FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:theirs":{}}}}`)},
				})
				return u
			}()},
			desired: []*unstructured.Unstructured{composed("node", "", map[string]any{"size": "small"})},
			want:    []ComposedChange{{Resource: "node", Kind: "Object", Name: "n-1", Action: Changed, Fields: []string{"metadata.labels.capxp.dev/planned", "spec.zone"}}},
		},
		"NothingComposedAnyMore": {
			observed: []*unstructured.Unstructured{composed("node", "n-1", nil)},
			want:     []ComposedChange{{Resource: "node", Kind: "Object", Name: "n-1", Action: Deleted}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, diffComposed(tc.observed, tc.desired), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
		})
	}
}

// renderer returns what it is told, and records what it was asked.
type renderer struct {
	composed []*unstructured.Unstructured
	err      error
	asked    []render.Input
}

func (r *renderer) Render(_ context.Context, in render.Input) (*render.Output, error) {
	r.asked = append(r.asked, in)
	return &render.Output{XR: in.XR, Composed: r.composed}, r.err
}

func xr(composition, policy string, refs ...*unstructured.Unstructured) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1alpha1")
	u.SetKind("CrossplaneCluster")
	u.SetNamespace(ns)
	u.SetName("alpha")
	var rs []any
	for _, r := range refs {
		rs = append(rs, map[string]any{"apiVersion": r.GetAPIVersion(), "kind": r.GetKind(), "name": r.GetName()})
	}
	cp := map[string]any{"compositionRef": map[string]any{"name": composition}, "resourceRefs": rs}
	if policy != "" {
		cp["compositionUpdatePolicy"] = policy
		cp["compositionRevisionRef"] = map[string]any{"name": composition + "-abc"}
	}
	u.Object["spec"] = map[string]any{"crossplane": cp}
	return u
}

func withRef(u *unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	_ = unstructured.SetNestedMap(u.Object, map[string]any{"kind": kind, "name": name}, "spec", "providerConfigRef")
	return u
}

func composition(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"mode": "Pipeline"}}}
	u.SetAPIVersion("apiextensions.crossplane.io/v1")
	u.SetKind("Composition")
	u.SetName(name)
	return u
}

func TestPredictXRs(t *testing.T) {
	object := composed("cluster", "alpha-obj", map[string]any{"size": "small"})
	cases := map[string]struct {
		infra    *unstructured.Unstructured
		proposed []*unstructured.Unstructured
		rd       *renderer
		noEngine bool
		creds    *Credentials
		want     []XR
		rendered int
	}{
		"AnXREditIsRendered": {
			infra: xr("local", "", object),
			// As merged onto the live XR: its references stay.
			proposed: []*unstructured.Unstructured{xr("byo", "", object)},
			rd:       &renderer{},
			want: []XR{{Kind: "CrossplaneCluster", Namespace: ns, Name: "alpha", Composition: "byo", Edited: []string{"spec.crossplane.compositionRef.name"},
				Changes: []ComposedChange{{Resource: "cluster", Kind: "Object", Name: "alpha-obj", Action: Deleted}}}},
			rendered: 1,
		},
		"ACompositionChangeReachesItsXRs": {
			infra:    xr("local", "", object),
			proposed: []*unstructured.Unstructured{composition("local")},
			rd:       &renderer{composed: []*unstructured.Unstructured{composed("cluster", "", map[string]any{"size": "large"})}},
			want: []XR{{Kind: "CrossplaneCluster", Namespace: ns, Name: "alpha", Composition: "local",
				Changes: []ComposedChange{{Resource: "cluster", Kind: "Object", Name: "alpha-obj", Action: Changed, Fields: []string{"spec.size"}}}}},
			rendered: 1,
		},
		"APinnedXRWaitsForItsReplacement": {
			infra:    xr("local", "Manual", object),
			proposed: []*unstructured.Unstructured{composition("local")},
			rd:       &renderer{},
			want: []XR{{Kind: "CrossplaneCluster", Namespace: ns, Name: "alpha", Composition: "local",
				Unknown: []string{"pinned to CompositionRevision local-abc (compositionUpdatePolicy Manual): the change reaches it when CAPI replaces its Machine"}}},
		},
		"AnotherCompositionDoesNotReachIt": {
			infra:    xr("local", "", object),
			proposed: []*unstructured.Unstructured{composition("byo")},
			rd:       &renderer{},
		},
		"APipelineThatFailsIsSaid": {
			infra:    xr("local", "", object),
			proposed: []*unstructured.Unstructured{xr("local", "")},
			rd:       &renderer{err: errors.New("function-patch-and-transform: boom")},
			want: []XR{{Kind: "CrossplaneCluster", Namespace: ns, Name: "alpha", Composition: "local", Edited: []string{"spec.crossplane.resourceRefs"},
				Unknown: []string{"the Composition's pipeline does not render it: function-patch-and-transform: boom"}}},
			rendered: 1,
		},
		"ACompositionNamingUngrantedCredentialsIsRefused": {
			infra:    xr("local", "", object),
			proposed: []*unstructured.Unstructured{composition("local")},
			rd:       &renderer{composed: []*unstructured.Unstructured{withRef(composed("cluster", "", map[string]any{"size": "small"}), "ClusterProviderConfig", "shared")}},
			creds: &Credentials{Providers: []credentials.Provider{{ConfigGroup: "kubernetes.m.crossplane.io", ManagedGroup: "kubernetes.m.crossplane.io"}},
				Record: &infrav1.NamespaceCredentialsSpec{Configs: []infrav1.UsableConfig{{APIGroup: "kubernetes.m.crossplane.io", Kind: "ProviderConfig", Name: "workload"}}}},
			want: []XR{{Kind: "CrossplaneCluster", Namespace: ns, Name: "alpha", Composition: "local",
				Changes: []ComposedChange{{Resource: "cluster", Kind: "Object", Name: "alpha-obj", Action: Changed, Fields: []string{"spec.providerConfigRef"},
					Refused: "namespace team-a may not use ClusterProviderConfig kubernetes.m.crossplane.io/shared (its NamespaceCredentials does not list it)"}}}},
			rendered: 1,
		},
		"AGrantedConfigIsAdmitted": {
			infra:    xr("local", "", object),
			proposed: []*unstructured.Unstructured{composition("local")},
			rd:       &renderer{composed: []*unstructured.Unstructured{withRef(composed("cluster", "", map[string]any{"size": "small"}), "ProviderConfig", "workload")}},
			creds: &Credentials{Providers: []credentials.Provider{{ConfigGroup: "kubernetes.m.crossplane.io", ManagedGroup: "kubernetes.m.crossplane.io"}},
				Record: &infrav1.NamespaceCredentialsSpec{Configs: []infrav1.UsableConfig{{APIGroup: "kubernetes.m.crossplane.io", Kind: "ProviderConfig", Name: "workload"}}}},
			want: []XR{{Kind: "CrossplaneCluster", Namespace: ns, Name: "alpha", Composition: "local",
				Changes: []ComposedChange{{Resource: "cluster", Kind: "Object", Name: "alpha-obj", Action: Changed, Fields: []string{"spec.providerConfigRef"}}}}},
			rendered: 1,
		},
		"AnUnreadRecordIsSaid": {
			infra:    xr("local", "", object),
			proposed: []*unstructured.Unstructured{composition("local")},
			rd:       &renderer{composed: []*unstructured.Unstructured{withRef(composed("cluster", "", map[string]any{"size": "small"}), "ProviderConfig", "workload")}},
			creds:    &Credentials{Providers: []credentials.Provider{{ConfigGroup: "kubernetes.m.crossplane.io", ManagedGroup: "kubernetes.m.crossplane.io"}}, Unread: errors.New("forbidden")},
			want: []XR{{Kind: "CrossplaneCluster", Namespace: ns, Name: "alpha", Composition: "local",
				Changes: []ComposedChange{{Resource: "cluster", Kind: "Object", Name: "alpha-obj", Action: Changed, Fields: []string{"spec.providerConfigRef"}}},
				Unknown: []string{"the credentials of Object cluster are not judged: forbidden"}}},
			rendered: 1,
		},
		"AnXRNamingUngrantedCredentialsIsHeld": {
			infra: xr("local", "", object),
			proposed: []*unstructured.Unstructured{func() *unstructured.Unstructured {
				u := xr("local", "", object)
				u.Object["spec"].(map[string]any)["providerConfigRef"] = map[string]any{"apiGroup": "kubernetes.m.crossplane.io", "kind": "ClusterProviderConfig", "name": "shared"}
				return u
			}()},
			rd: &renderer{},
			creds: &Credentials{Providers: []credentials.Provider{{ConfigGroup: "kubernetes.m.crossplane.io", ManagedGroup: "kubernetes.m.crossplane.io"}},
				Record: &infrav1.NamespaceCredentialsSpec{}},
			want: []XR{{Kind: "CrossplaneCluster", Namespace: ns, Name: "alpha", Composition: "local", Edited: []string{"spec.providerConfigRef"},
				Held: "its providerConfigRef names ClusterProviderConfig kubernetes.m.crossplane.io/shared, which namespace team-a may not use: the bridge holds it and nothing of it is composed"}},
		},
		"AnXRTheBridgeReleasesIsRendered": {
			infra: xr("local", "", object),
			proposed: []*unstructured.Unstructured{func() *unstructured.Unstructured {
				u := xr("local", "", object)
				u.SetAnnotations(map[string]string{"crossplane.io/paused": "true", infrav1.CredentialsHoldAnnotation: "ClusterProviderConfig/shared"})
				u.Object["spec"].(map[string]any)["providerConfigRef"] = map[string]any{"apiGroup": "kubernetes.m.crossplane.io", "kind": "ProviderConfig", "name": "workload"}
				return u
			}()},
			rd: &renderer{composed: []*unstructured.Unstructured{composed("cluster", "", map[string]any{"size": "small"})}},
			creds: &Credentials{Providers: []credentials.Provider{{ConfigGroup: "kubernetes.m.crossplane.io", ManagedGroup: "kubernetes.m.crossplane.io"}},
				Record: &infrav1.NamespaceCredentialsSpec{Configs: []infrav1.UsableConfig{{APIGroup: "kubernetes.m.crossplane.io", Kind: "ProviderConfig", Name: "workload"}}}},
			want:     []XR{{Kind: "CrossplaneCluster", Namespace: ns, Name: "alpha", Composition: "local", Edited: []string{"metadata.annotations", "spec.providerConfigRef"}}},
			rendered: 1,
		},
		"APausedXRComposesNothing": {
			infra: xr("local", "", object),
			proposed: []*unstructured.Unstructured{func() *unstructured.Unstructured {
				u := xr("local", "", object)
				u.SetAnnotations(map[string]string{"crossplane.io/paused": "true"})
				return u
			}()},
			rd: &renderer{},
			want: []XR{{Kind: "CrossplaneCluster", Namespace: ns, Name: "alpha", Composition: "local", Edited: []string{"metadata.annotations"},
				Unknown: []string{"paused (crossplane.io/paused): Crossplane composes nothing of it until it is unpaused"}}},
		},
		"NoEngineIsSaid": {
			infra:    xr("local", "", object),
			proposed: []*unstructured.Unstructured{xr("local", "")},
			noEngine: true,
			want: []XR{{Kind: "CrossplaneCluster", Namespace: ns, Name: "alpha", Composition: "local", Edited: []string{"spec.crossplane.resourceRefs"},
				Unknown: []string{"composed resources not rendered: no tools"}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(Scheme()).
				WithObjects([]client.Object{object, composition("local"), composition("byo")}...).Build()
			o := &Observed{InfraClusters: map[string]*unstructured.Unstructured{"alpha": tc.infra}}
			var rd Renderer = tc.rd
			if tc.noEngine {
				rd = NoRenderer{Reason: errors.New("no tools")}
			}
			got := predictXRs(context.Background(), c, rd, tc.creds, o, tc.proposed, nil)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("-want +got:\n%s", diff)
			}
			if tc.rd != nil && len(tc.rd.asked) != tc.rendered {
				t.Errorf("rendered %d times, want %d", len(tc.rd.asked), tc.rendered)
			}
		})
	}
}
