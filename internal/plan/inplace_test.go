package plan

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment/mdutil"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// stubHook answers CanUpdateMachineSet as told, and counts its calls.
type stubHook struct {
	resp  runtimehooksv1.CanUpdateMachineSetResponse
	calls int
}

func (h *stubHook) CanUpdateMachineSet(_ context.Context, _ *runtimehooksv1.CanUpdateMachineSetRequest, resp *runtimehooksv1.CanUpdateMachineSetResponse) {
	h.calls++
	*resp = h.resp
}

// A MachineDeployment's old MachineSet is predicted updated in place only
// as CAPI decides it: a rolling update, a MachineSet CAPI finds eligible,
// both templates there, and CAPXP's answer patching the old templates into
// the new ones, with nothing else of the machine spec changed.
func TestUpdatesInPlace(t *testing.T) {
	machineTemplate := func(name, size, image string) *infrav1.CrossplaneMachineTemplate {
		return &infrav1.CrossplaneMachineTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: infrav1.CrossplaneMachineTemplateSpec{Template: infrav1.CrossplaneMachineTemplateResource{
				Spec: infrav1.CrossplaneMachineSpec{Parameters: infrav1.CrossplaneMachineParameters{Size: size, Image: image}},
			}},
		}
	}
	configTemplate := func(name string, verbosity int32) *bootstrapv1.KubeadmConfigTemplate {
		return &bootstrapv1.KubeadmConfigTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       bootstrapv1.KubeadmConfigTemplateSpec{Template: bootstrapv1.KubeadmConfigTemplateResource{Spec: bootstrapv1.KubeadmConfigSpec{Verbosity: ptr.To(verbosity)}}},
		}
	}
	spec := func(infra, config, version string) clusterv1.MachineSpec {
		return clusterv1.MachineSpec{
			ClusterName: "alpha", Version: version,
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfigTemplate", Name: config}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "CrossplaneMachineTemplate", Name: infra},
		}
	}
	sizePatch := runtimehooksv1.Patch{PatchType: runtimehooksv1.JSONMergePatchType, Patch: []byte(`{"spec":{"template":{"spec":{"parameters":{"size":"large"}}}}}`)}
	answered := func(p runtimehooksv1.Patch, msg string) runtimehooksv1.CanUpdateMachineSetResponse {
		r := runtimehooksv1.CanUpdateMachineSetResponse{InfrastructureMachineTemplatePatch: p}
		r.Status, r.Message = runtimehooksv1.ResponseStatusSuccess, msg
		return r
	}
	eligible := mdutil.UpToDateResult{EligibleForInPlaceUpdate: true}
	cases := map[string]struct {
		desired  clusterv1.MachineSpec
		strategy clusterv1.MachineDeploymentRolloutStrategyType
		// newReplicas, when set, are the replicas of a new MachineSet
		// that exists already.
		newReplicas *int32
		result      mdutil.UpToDateResult
		resp        runtimehooksv1.CanUpdateMachineSetResponse
		want        bool
		wantCalls   int
		wantErr     bool
	}{
		"the hook patches the size in: updated in place": {
			desired: spec("large", "kct", "v1.36.5"), result: eligible, resp: answered(sizePatch, "in place: spec.parameters.size"),
			want: true, wantCalls: 1,
		},
		"the hook answers replace: replaced": {
			desired: spec("other-image", "kct", "v1.36.5"), result: eligible, resp: answered(runtimehooksv1.Patch{}, "replace: spec.parameters.image"),
			wantCalls: 1,
		},
		"the patch leaves a difference: replaced": {
			desired: spec("other-image", "kct", "v1.36.5"), result: eligible, resp: answered(sizePatch, "in place: spec.parameters.size"),
			wantCalls: 1,
		},
		"the bootstrap template changed too: replaced": {
			desired: spec("large", "kct-verbose", "v1.36.5"), result: eligible, resp: answered(sizePatch, "in place: spec.parameters.size"),
			wantCalls: 1,
		},
		"a bootstrap template of the same content under another name: updated in place": {
			desired: spec("large", "kct-copy", "v1.36.5"), result: eligible, resp: answered(sizePatch, "in place: spec.parameters.size"),
			want: true, wantCalls: 1,
		},
		"the version changed too: replaced": {
			desired: spec("large", "kct", "v1.37.0"), result: eligible, resp: answered(sizePatch, "in place: spec.parameters.size"),
			wantCalls: 1,
		},
		"OnDelete: CAPI never asks": {
			desired: spec("large", "kct", "v1.36.5"), strategy: clusterv1.OnDeleteMachineDeploymentStrategyType, result: eligible,
			resp: answered(sizePatch, "in place"),
		},
		"not eligible (rolloutAfter): CAPI never asks": {
			desired: spec("large", "kct", "v1.36.5"), resp: answered(sizePatch, "in place"),
		},
		"the new template does not exist: CAPI never asks": {
			desired: spec("missing", "kct", "v1.36.5"), result: eligible, resp: answered(sizePatch, "in place"),
		},
		"the new MachineSet has every replica already: CAPI never asks": {
			desired: spec("large", "kct", "v1.36.5"), result: eligible, resp: answered(sizePatch, "in place"), newReplicas: ptr.To[int32](2),
		},
		"the new MachineSet has some replicas: updated in place": {
			desired: spec("large", "kct", "v1.36.5"), result: eligible, resp: answered(sizePatch, "in place"), newReplicas: ptr.To[int32](1),
			want: true, wantCalls: 1,
		},
		"the hook fails: an error": {
			desired: spec("large", "kct", "v1.36.5"), result: eligible,
			resp:      runtimehooksv1.CanUpdateMachineSetResponse{CommonResponse: runtimehooksv1.CommonResponse{Status: runtimehooksv1.ResponseStatusFailure, Message: "cannot list"}},
			wantCalls: 1, wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{infrav1.GroupVersion, bootstrapv1.GroupVersion})
			mapper.Add(infrav1.GroupVersion.WithKind("CrossplaneMachineTemplate"), meta.RESTScopeNamespace)
			mapper.Add(bootstrapv1.GroupVersion.WithKind("KubeadmConfigTemplate"), meta.RESTScopeNamespace)
			c := fake.NewClientBuilder().WithScheme(Scheme()).WithRESTMapper(mapper).WithObjects([]client.Object{
				machineTemplate("small", "small", ""), machineTemplate("large", "large", ""), machineTemplate("other-image", "large", "local-2"),
				configTemplate("kct", 1), configTemplate("kct-copy", 1), configTemplate("kct-verbose", 4),
			}...).Build()
			hook := &stubHook{resp: tc.resp}
			rule := &inPlaceRule{hook: hook, reader: c}
			md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers"},
				Spec: clusterv1.MachineDeploymentSpec{Replicas: ptr.To[int32](2), Template: clusterv1.MachineTemplateSpec{Spec: tc.desired}}}
			md.Spec.Rollout.Strategy.Type = tc.strategy
			ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers-abc"},
				Spec: clusterv1.MachineSetSpec{Template: clusterv1.MachineTemplateSpec{Spec: spec("small", "kct", "v1.36.5")}}}
			var newMS *clusterv1.MachineSet
			if tc.newReplicas != nil {
				newMS = &clusterv1.MachineSet{Spec: clusterv1.MachineSetSpec{Replicas: tc.newReplicas}}
			}
			got, _, err := rule.updatesInPlace(context.Background(), md, ms, newMS, tc.result)
			if (err != nil) != tc.wantErr {
				t.Fatalf("updatesInPlace: error %v, want an error: %t", err, tc.wantErr)
			}
			if got != tc.want || hook.calls != tc.wantCalls {
				t.Errorf("updatesInPlace = %t with %d calls of the hook, want %t with %d", got, hook.calls, tc.want, tc.wantCalls)
			}
		})
	}
}

// Without CAPI's discovery of CAPXP's hooks, nothing is predicted in place.
func TestUpdatesInPlaceWithoutTheHooks(t *testing.T) {
	var rule *inPlaceRule
	got, _, err := rule.updatesInPlace(context.Background(), &clusterv1.MachineDeployment{}, &clusterv1.MachineSet{}, nil, mdutil.UpToDateResult{EligibleForInPlaceUpdate: true})
	if got || err != nil {
		t.Errorf("updatesInPlace without the hooks = %t, %v; want false, nil", got, err)
	}
}

// A hook's patch is of the whole object, a merge patch or a JSON patch.
func TestApplyPatch(t *testing.T) {
	doc := []byte(`{"spec":{"template":{"spec":{"parameters":{"size":"small","image":"a"}}}}}`)
	cases := map[string]struct {
		patch   runtimehooksv1.Patch
		want    string
		wantErr error
	}{
		"merge": {
			patch: runtimehooksv1.Patch{PatchType: runtimehooksv1.JSONMergePatchType, Patch: []byte(`{"spec":{"template":{"spec":{"parameters":{"size":"large"}}}}}`)},
			want:  `{"spec":{"template":{"spec":{"parameters":{"image":"a","size":"large"}}}}}`,
		},
		"json patch": {
			patch: runtimehooksv1.Patch{PatchType: runtimehooksv1.JSONPatchType, Patch: []byte(`[{"op":"replace","path":"/spec/template/spec/parameters/size","value":"large"}]`)},
			want:  `{"spec":{"template":{"spec":{"parameters":{"image":"a","size":"large"}}}}}`,
		},
		"an unknown type": {
			patch:   runtimehooksv1.Patch{PatchType: "Strategic", Patch: []byte(`{}`)},
			wantErr: errors.New(`a patch of type "Strategic"`),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := applyPatch(doc, tc.patch)
			if tc.wantErr != nil {
				if err == nil || err.Error() != tc.wantErr.Error() {
					t.Fatalf("applyPatch: %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want, decoded any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(got, &decoded); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, decoded); diff != "" {
				t.Errorf("applyPatch (-want +got):\n%s", diff)
			}
		})
	}
}

// Plan predicts in place once CAPI has discovered CAPXP's hooks; what it
// cannot read it says, and predicts replacements.
func TestObserveInPlace(t *testing.T) {
	discovered := func(hooks ...string) *runtimev1.ExtensionConfig {
		ec := &runtimev1.ExtensionConfig{ObjectMeta: metav1.ObjectMeta{Name: "capxp"}}
		for _, h := range hooks {
			ec.Status.Handlers = append(ec.Status.Handlers, runtimev1.ExtensionHandler{
				Name: h + ".capxp", RequestHook: runtimev1.GroupVersionHook{APIVersion: runtimehooksv1.GroupVersion.String(), Hook: h}})
		}
		return ec
	}
	cases := map[string]struct {
		objs     []client.Object
		getErr   error
		want     bool
		wantNote bool
	}{
		"not registered": {},
		"registered, not discovered (no RuntimeSDK)": {objs: []client.Object{discovered()}},
		"discovered":                             {objs: []client.Object{discovered("CanUpdateMachineSet", "CanUpdateMachine", "UpdateMachine")}, want: true},
		"discovered without CanUpdateMachineSet": {objs: []client.Object{discovered("UpdateMachine")}},
		"refused":                                {getErr: apierrors.NewForbidden(runtimev1.GroupVersion.WithResource("extensionconfigs").GroupResource(), "capxp", errors.New("no")), wantNote: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(tc.objs...).WithStatusSubresource(&runtimev1.ExtensionConfig{})
			if tc.getErr != nil {
				b = b.WithInterceptorFuncs(interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
					return tc.getErr
				}})
			}
			got := ObserveInPlace(context.Background(), b.Build())
			if got.Discovered != tc.want || (got.Unread != "") != tc.wantNote {
				t.Errorf("ObserveInPlace = %+v, want discovered %t, a note %t", got, tc.want, tc.wantNote)
			}
		})
	}
}

// A plan predicting an in-place update exits as one that replaces: plan
// cannot read CAPI's InPlaceUpdates feature gate, and with it off CAPI
// replaces those Machines.
func TestReplacesCountsInPlace(t *testing.T) {
	for verdict, want := range map[Verdict]bool{Kept: false, Outdated: false, Replaced: true, UpdatedInPlace: true} {
		p := &Plan{Clusters: []Cluster{{Machines: []Machine{{Name: "m", Verdict: verdict}}}}}
		if got := p.Replaces(); got != want {
			t.Errorf("Replaces() with a Machine %s = %t, want %t", verdict, got, want)
		}
	}
}
