package hooks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

const ns = "team-a"

var composedGVK = schema.GroupVersionKind{Group: "kubernetes.m.crossplane.io", Version: "v1alpha1", Kind: "Object"}

func newExtension(t *testing.T, objs ...client.Object) *Extension {
	t.Helper()
	return newExtensionWith(t, interceptor.Funcs{}, objs...)
}

// newExtensionWith is newExtension reading through funcs.
func newExtensionWith(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) *Extension {
	t.Helper()
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	s.AddKnownTypeWithName(composedGVK, &unstructured.Unstructured{})
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{infrav1.GroupVersion, clusterv1.GroupVersion, compositionRevision.GroupVersion(), composedGVK.GroupVersion()})
	mapper.Add(infrav1.GroupVersion.WithKind(infrav1.CrossplaneMachineKind), meta.RESTScopeNamespace)
	mapper.Add(clusterv1.GroupVersion.WithKind("Machine"), meta.RESTScopeNamespace)
	mapper.Add(compositionRevision, meta.RESTScopeRoot)
	mapper.Add(composedGVK, meta.RESTScopeNamespace)
	c := fake.NewClientBuilder().WithScheme(s).WithRESTMapper(mapper).WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
	return NewExtension(c, c, mapper)
}

// machine is a Machine of MachineSet ms whose XR is named after it.
func machine(name, ms string, annotations ...string) *clusterv1.Machine {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{clusterv1.MachineSetNameLabel: ms}}}
	for _, a := range annotations {
		metav1.SetMetaDataAnnotation(&m.ObjectMeta, a, "")
	}
	m.Spec.ClusterName = "demo"
	m.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.CrossplaneMachineKind, Name: name}
	return m
}

// otherMachine is a Machine of another provider's kind.
func otherMachine(name, ms string) *clusterv1.Machine {
	m := machine(name, ms)
	m.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachine", Name: name}
	return m
}

// xr is a machine XR pinned to revision, with its conditions at gen and
// the composed resources it references.
func xr(name, revision string, gen, observed int64, refs []string, annotations ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": infrav1.GroupVersion.String(), "kind": infrav1.CrossplaneMachineKind,
		"metadata": map[string]any{"namespace": ns, "name": name, "uid": name + "-uid", "generation": gen},
		"spec":     map[string]any{"parameters": map[string]any{"size": "small"}},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "observedGeneration": observed},
			map[string]any{"type": "Ready", "status": "True", "reason": "Available", "observedGeneration": observed},
		}},
	}}
	if revision != "" {
		_ = unstructured.SetNestedField(u.Object, revision, "spec", "crossplane", "compositionRevisionRef", "name")
		_ = unstructured.SetNestedField(u.Object, "crossplanemachine-local", "spec", "crossplane", "compositionRef", "name")
	}
	var list []any
	for _, r := range refs {
		list = append(list, map[string]any{"apiVersion": composedGVK.GroupVersion().String(), "kind": composedGVK.Kind, "name": r})
	}
	if list != nil {
		_ = unstructured.SetNestedSlice(u.Object, list, "spec", "crossplane", "resourceRefs")
	}
	a := map[string]string{}
	for _, k := range annotations {
		a[k] = ""
	}
	u.SetAnnotations(a)
	return u
}

func revision(name, declared string) *unstructured.Unstructured {
	return revisionOf("crossplanemachine-local", name, declared)
}

// revisionBootstrap is revision rev-1, also declaring the bootstrap fields its
// hosts apply.
func revisionBootstrap(declared, bootstrap string) *unstructured.Unstructured {
	u := revision("rev-1", declared)
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[infrav1.InPlaceBootstrapFieldsAnnotation] = bootstrap
	u.SetAnnotations(a)
	return u
}

func revisionOf(composition, name, declared string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(compositionRevision)
	u.SetName(name)
	u.SetLabels(map[string]string{compositionNameLabel: composition})
	if declared != "" {
		u.SetAnnotations(map[string]string{infrav1.InPlaceFieldsAnnotation: declared})
	}
	_ = unstructured.SetNestedField(u.Object, "crossplanemachine-local", "spec", "compositeTypeRef", "kind")
	return u
}

// composedObject is the Object "node", controlled by the XR of ownerUID.
func composedObject(ownerUID string, gen, observed int64) *unstructured.Unstructured {
	const name = "node"
	u := &unstructured.Unstructured{Object: map[string]any{
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Synced", "status": "True", "observedGeneration": observed},
			map[string]any{"type": "Ready", "status": "True", "observedGeneration": observed},
		}},
	}}
	u.SetGroupVersionKind(composedGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetGeneration(gen)
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: infrav1.CrossplaneMachineKind, Name: "m", UID: types.UID(ownerUID), Controller: new(true)}})
	return u
}

// template is a CrossplaneMachineTemplate of the given size, as CAPI
// sends it.
func template(t *testing.T, size string) runtime.RawExtension {
	t.Helper()
	raw, err := json.Marshal(map[string]any{
		"apiVersion": infrav1.GroupVersion.String(), "kind": "CrossplaneMachineTemplate",
		"metadata": map[string]any{"namespace": ns, "name": "workers-" + size},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"parameters": map[string]any{"size": size}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: raw}
}

// kubeadmConfig is a bootstrap config with one file of the given content,
// as CAPI sends it: a KubeadmConfigTemplate's spec.template.spec when
// template, else a KubeadmConfig's spec. An empty content is no object.
func kubeadmConfig(t *testing.T, content string, template bool) runtime.RawExtension {
	t.Helper()
	if content == "" {
		return runtime.RawExtension{}
	}
	spec := map[string]any{
		"files":             []any{map[string]any{"path": "/tmp/test", "content": content}},
		"joinConfiguration": map[string]any{"nodeRegistration": map[string]any{"name": "n"}},
	}
	obj := map[string]any{"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig", "metadata": map[string]any{"namespace": ns, "name": "m"}, "spec": spec}
	if template {
		obj["kind"] = "KubeadmConfigTemplate"
		obj["spec"] = map[string]any{"template": map[string]any{"spec": spec}}
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: raw}
}

func TestCanUpdateMachineSet(t *testing.T) {
	cases := map[string]struct {
		reason    string
		objs      []client.Object
		desired   string
		bootstrap clusterv1.Bootstrap
		// dataSecret leaves the Machines' bootstrap a data Secret by name.
		dataSecret bool
		// files are the bootstrap templates' file contents, current and
		// desired; none sends no bootstrap template.
		files              [2]string
		wantPatch          string
		wantBootstrapPatch string
		wantMsg            string
	}{
		"BootstrapFiles": {
			reason:             "a file every running machine's hosts apply is patched into the bootstrap template",
			objs:               []client.Object{machine("m1", "ms-old"), xr("m1", "rev-1", 1, 1, nil), revisionBootstrap("spec.parameters.size", "spec.files")},
			desired:            "small",
			files:              [2]string{"first", "second"},
			wantBootstrapPatch: `{"spec":{"template":{"spec":{"files":[{"content":"second","path":"/tmp/test"}]}}}}`,
			wantMsg:            "in place: bootstrap config spec.files",
		},
		"BootstrapAndInfrastructure": {
			reason:             "both halves are patched when both are declared",
			objs:               []client.Object{machine("m1", "ms-old"), xr("m1", "rev-1", 1, 1, nil), revisionBootstrap("spec.parameters.size", "spec.files")},
			desired:            "large",
			files:              [2]string{"first", "second"},
			wantPatch:          `{"spec":{"template":{"spec":{"parameters":{"size":"large"}}}}}`,
			wantBootstrapPatch: `{"spec":{"template":{"spec":{"files":[{"content":"second","path":"/tmp/test"}]}}}}`,
			wantMsg:            "in place: spec.parameters.size, bootstrap config spec.files",
		},
		"BootstrapUndeclared": {
			reason:  "a bootstrap change the hosts are not declared to apply rolls the machines, and nothing is patched",
			objs:    []client.Object{machine("m1", "ms-old"), xr("m1", "rev-1", 1, 1, nil), revision("rev-1", "spec.parameters.size")},
			desired: "large",
			files:   [2]string{"first", "second"},
			wantMsg: "replace: bootstrap config spec.files: CompositionRevision rev-1 does not declare it in place (capxp.dev/in-place-bootstrap-fields)",
		},
		"BootstrapAdded": {
			reason:  "a bootstrap template that appears is not a change CAPXP makes in place",
			objs:    []client.Object{machine("m1", "ms-old"), xr("m1", "rev-1", 1, 1, nil), revisionBootstrap("", "spec.files")},
			desired: "small",
			files:   [2]string{"", "second"},
			wantMsg: "replace: a bootstrap config added or removed is not a change of its fields",
		},
		"Declared": {
			reason: "every running machine's revision declares the size: the template's change is patched",
			objs: []client.Object{machine("m1", "ms-old"), machine("m2", "ms-old"), machine("other", "ms-other"),
				xr("m1", "rev-1", 1, 1, nil), xr("m2", "rev-2", 1, 1, nil), xr("other", "rev-0", 1, 1, nil),
				revision("rev-1", "spec.parameters.size"), revision("rev-2", "spec.parameters"), revision("rev-0", "")},
			desired:   "large",
			wantPatch: `{"spec":{"template":{"spec":{"parameters":{"size":"large"}}}}}`,
			wantMsg:   "in place: spec.parameters.size",
		},
		"OneMachineOnAnOlderRevision": {
			reason: "a machine of this MachineSet pinned to a revision that declares nothing rolls them all",
			objs: []client.Object{machine("m1", "ms-old"), machine("m2", "ms-old"),
				xr("m1", "rev-1", 1, 1, nil), xr("m2", "rev-0", 1, 1, nil),
				revision("rev-1", "spec.parameters.size"), revision("rev-0", "")},
			desired: "large",
			wantMsg: "replace: spec.parameters.size: CompositionRevision rev-0 does not declare it in place (capxp.dev/in-place-fields)",
		},
		"NotComposedYet": {
			reason:  "a machine whose XR has no revision yet cannot be judged, and rolls",
			objs:    []client.Object{machine("m1", "ms-old"), xr("m1", "", 1, 1, nil)},
			desired: "large",
			wantMsg: "replace: spec.parameters.size: CompositionRevision of CrossplaneMachine m1: the XR is not composed yet",
		},
		"RevisionMalformed": {
			reason:  "a revision declaring what never changes in place declares nothing, and says why",
			objs:    []client.Object{machine("m1", "ms-old"), xr("m1", "rev-1", 1, 1, nil), revision("rev-1", "spec.providerConfigRef")},
			desired: "large",
			wantMsg: "replace: spec.parameters.size: CompositionRevision rev-1: capxp.dev/in-place-fields: spec.providerConfigRef never changes in place: a machine moves to other credentials only by being replaced, and judged as a new machine",
		},
		"ForeignRevision": {
			reason:  "a revision of another Composition, which the XR's author wrote into its reference, declares nothing",
			objs:    []client.Object{machine("m1", "ms-old"), xr("m1", "rev-x", 1, 1, nil), revisionOf("someone-elses", "rev-x", "spec.parameters")},
			desired: "large",
			wantMsg: "replace: spec.parameters.size: CompositionRevision rev-x: not a revision of the XR's Composition \"crossplanemachine-local\"",
		},
		"AnotherProvidersMachine": {
			reason:  "a Machine of a kind CAPXP does not read is another provider's: replaced, without failing CAPI's rollout",
			objs:    []client.Object{otherMachine("m1", "ms-old")},
			desired: "large",
			wantMsg: "replace: spec.parameters.size: CompositionRevision of Machine m1: its infrastructure, a DockerMachine, is not a kind CAPXP reads",
		},
		"DataSecretByName": {
			reason:     "CAPI never starts an in-place update of a Machine whose bootstrap data Secret is named: it is replaced",
			objs:       []client.Object{machine("m1", "ms-old"), xr("m1", "rev-1", 1, 1, nil), revision("rev-1", "spec.parameters.size")},
			desired:    "large",
			bootstrap:  clusterv1.Bootstrap{DataSecretName: new("demo-bootstrap")},
			dataSecret: true,
			wantMsg:    "replace: the Machines take their bootstrap data Secret by name (spec.template.spec.bootstrap.dataSecretName), and CAPI updates in place only Machines of a bootstrap config",
		},
		"NoChange": {
			reason:  "a template with the same spec needs no patch",
			objs:    []client.Object{machine("m1", "ms-old"), xr("m1", "rev-1", 1, 1, nil), revision("rev-1", "")},
			desired: "small",
			wantMsg: "no change of the infrastructure or the bootstrap config's spec",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newExtension(t, tc.objs...)
			req := &runtimehooksv1.CanUpdateMachineSetRequest{}
			req.Current.MachineSet.Namespace, req.Current.MachineSet.Name = ns, "ms-old"
			req.Current.MachineSet.Spec.Template.Spec.Bootstrap = tc.bootstrap
			if !tc.dataSecret {
				req.Current.MachineSet.Spec.Template.Spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfigTemplate", Name: "workers"}
			}
			req.Current.InfrastructureMachineTemplate = template(t, "small")
			req.Desired.InfrastructureMachineTemplate = template(t, tc.desired)
			req.Current.BootstrapConfigTemplate = kubeadmConfig(t, tc.files[0], true)
			req.Desired.BootstrapConfigTemplate = kubeadmConfig(t, tc.files[1], true)
			resp := &runtimehooksv1.CanUpdateMachineSetResponse{}
			e.CanUpdateMachineSet(context.Background(), req, resp)
			if resp.Status != runtimehooksv1.ResponseStatusSuccess {
				t.Fatalf("%s\nCanUpdateMachineSet(): %s: %s", tc.reason, resp.Status, resp.Message)
			}
			if diff := cmp.Diff(tc.wantPatch, string(resp.InfrastructureMachineTemplatePatch.Patch)); diff != "" {
				t.Errorf("%s\nCanUpdateMachineSet(): patch -want, +got:\n%s", tc.reason, diff)
			}
			if tc.wantPatch != "" && resp.InfrastructureMachineTemplatePatch.PatchType != runtimehooksv1.JSONMergePatchType {
				t.Errorf("%s\nCanUpdateMachineSet(): patch type %q", tc.reason, resp.InfrastructureMachineTemplatePatch.PatchType)
			}
			if diff := cmp.Diff(tc.wantBootstrapPatch, string(resp.BootstrapConfigTemplatePatch.Patch)); diff != "" {
				t.Errorf("%s\nCanUpdateMachineSet(): bootstrap patch -want, +got:\n%s", tc.reason, diff)
			}
			if resp.MachineSetPatch.IsDefined() {
				t.Errorf("%s\nCanUpdateMachineSet(): patched the MachineSet", tc.reason)
			}
			if resp.Message != tc.wantMsg {
				t.Errorf("%s\nCanUpdateMachineSet(): message %q, want %q", tc.reason, resp.Message, tc.wantMsg)
			}
		})
	}
}

// CanUpdateMachineSet reads a MachineSet's XRs in one list, by the label
// CAPI gives them, within the hook's timeout however many Machines it has;
// an XR without the label is read by name.
func TestCanUpdateMachineSetListsTheXRs(t *testing.T) {
	labelled := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		u.SetLabels(map[string]string{clusterv1.MachineSetNameLabel: "ms-old"})
		return u
	}
	var gets []string
	e := newExtensionWith(t, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if obj.GetObjectKind().GroupVersionKind().Kind == infrav1.CrossplaneMachineKind {
			gets = append(gets, key.Name)
		}
		return c.Get(ctx, key, obj, opts...)
	}},
		machine("m1", "ms-old"), machine("m2", "ms-old"), machine("m3", "ms-old"),
		labelled(xr("m1", "rev-1", 1, 1, nil)), labelled(xr("m2", "rev-1", 1, 1, nil)), xr("m3", "rev-1", 1, 1, nil),
		revision("rev-1", "spec.parameters.size"))
	req := &runtimehooksv1.CanUpdateMachineSetRequest{}
	req.Current.MachineSet.Namespace, req.Current.MachineSet.Name = ns, "ms-old"
	req.Current.MachineSet.Spec.Template.Spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfigTemplate", Name: "workers"}
	req.Current.InfrastructureMachineTemplate = template(t, "small")
	req.Desired.InfrastructureMachineTemplate = template(t, "large")
	resp := &runtimehooksv1.CanUpdateMachineSetResponse{}
	e.CanUpdateMachineSet(context.Background(), req, resp)
	if resp.Message != "in place: spec.parameters.size" {
		t.Errorf("CanUpdateMachineSet(): %s: %q, want in place", resp.Status, resp.Message)
	}
	if diff := cmp.Diff([]string{"m3"}, gets); diff != "" {
		t.Errorf("CanUpdateMachineSet() read these XRs by name (-want +got):\n%s", diff)
	}
}

// object is a CrossplaneMachine of the given size, as CAPI sends it.
func object(t *testing.T, size string) runtime.RawExtension {
	t.Helper()
	raw, err := json.Marshal(map[string]any{
		"apiVersion": infrav1.GroupVersion.String(), "kind": infrav1.CrossplaneMachineKind,
		"metadata": map[string]any{"namespace": ns, "name": "m1"},
		"spec":     map[string]any{"parameters": map[string]any{"size": size}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: raw}
}

func TestCanUpdateMachine(t *testing.T) {
	cases := map[string]struct {
		reason             string
		objs               []client.Object
		desired            string
		files              [2]string
		wantPatch          string
		wantBootstrapPatch string
		wantMsg            string
	}{
		"ControlPlaneFiles": {
			reason:             "a control-plane Machine's file, which its revision's hosts apply, is patched into its KubeadmConfig",
			objs:               []client.Object{machine("m1", ""), xr("m1", "rev-1", 1, 1, nil), revisionBootstrap("spec.parameters.size", "spec.files")},
			desired:            "small",
			files:              [2]string{"first", "second"},
			wantBootstrapPatch: `{"spec":{"files":[{"content":"second","path":"/tmp/test"}]}}`,
			wantMsg:            "in place: bootstrap config spec.files",
		},
		"Size": {
			reason:    "the XR's declared field is patched into the XR, the bootstrap config unchanged",
			objs:      []client.Object{machine("m1", ""), xr("m1", "rev-1", 1, 1, nil), revisionBootstrap("spec.parameters.size", "spec.files")},
			desired:   "large",
			files:     [2]string{"first", "first"},
			wantPatch: `{"spec":{"parameters":{"size":"large"}}}`,
			wantMsg:   "in place: spec.parameters.size",
		},
		"FilesUndeclared": {
			reason:  "a revision that declares no bootstrap field replaces the Machine on a file's change",
			objs:    []client.Object{machine("m1", ""), xr("m1", "rev-1", 1, 1, nil), revision("rev-1", "spec.parameters.size")},
			desired: "large",
			files:   [2]string{"first", "second"},
			wantMsg: "replace: bootstrap config spec.files: CompositionRevision rev-1 does not declare it in place (capxp.dev/in-place-bootstrap-fields)",
		},
		"MalformedBootstrapDeclaration": {
			reason:  "a malformed bootstrap declaration makes the revision declare nothing, the XR's fields included",
			objs:    []client.Object{machine("m1", ""), xr("m1", "rev-1", 1, 1, nil), revisionBootstrap("spec.parameters.size", "metadata")},
			desired: "large",
			files:   [2]string{"first", "first"},
			wantMsg: "replace: spec.parameters.size: CompositionRevision rev-1: capxp.dev/in-place-bootstrap-fields: \"metadata\" is not a field of the bootstrap config's spec (spec.files, say)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newExtension(t, tc.objs...)
			req := &runtimehooksv1.CanUpdateMachineRequest{}
			req.Current.Machine.Namespace, req.Current.Machine.Name = ns, "m1"
			req.Current.InfrastructureMachine = object(t, "small")
			req.Desired.InfrastructureMachine = object(t, tc.desired)
			req.Current.BootstrapConfig = kubeadmConfig(t, tc.files[0], false)
			req.Desired.BootstrapConfig = kubeadmConfig(t, tc.files[1], false)
			resp := &runtimehooksv1.CanUpdateMachineResponse{}
			e.CanUpdateMachine(context.Background(), req, resp)
			if resp.Status != runtimehooksv1.ResponseStatusSuccess {
				t.Fatalf("%s\nCanUpdateMachine(): %s: %s", tc.reason, resp.Status, resp.Message)
			}
			if diff := cmp.Diff(tc.wantPatch, string(resp.InfrastructureMachinePatch.Patch)); diff != "" {
				t.Errorf("%s\nCanUpdateMachine(): patch -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantBootstrapPatch, string(resp.BootstrapConfigPatch.Patch)); diff != "" {
				t.Errorf("%s\nCanUpdateMachine(): bootstrap patch -want, +got:\n%s", tc.reason, diff)
			}
			if resp.MachinePatch.IsDefined() {
				t.Errorf("%s\nCanUpdateMachine(): patched the Machine", tc.reason)
			}
			if resp.Message != tc.wantMsg {
				t.Errorf("%s\nCanUpdateMachine(): message %q, want %q", tc.reason, resp.Message, tc.wantMsg)
			}
		})
	}
}

func TestUpdateMachine(t *testing.T) {
	inProgress := clusterv1.UpdateInProgressAnnotation
	cases := map[string]struct {
		reason    string
		objs      []client.Object
		wantDone  bool
		wantFail  bool
		wantInMsg string
	}{
		"Done": {
			reason:    "the XR and what it composed took their current generations",
			objs:      []client.Object{machine("m", "ms", inProgress), xr("m", "rev-1", 3, 3, []string{"node"}, inProgress), composedObject("m-uid", 3, 3)},
			wantDone:  true,
			wantInMsg: "CrossplaneMachine m and everything it composed took the change",
		},
		"CrossplaneNotYet": {
			reason:    "Crossplane has not composed the generation CAPI's change made",
			objs:      []client.Object{machine("m", "ms", inProgress), xr("m", "rev-1", 3, 2, []string{"node"}, inProgress), composedObject("m-uid", 2, 2)},
			wantInMsg: "waiting for generation 3",
		},
		"ProviderNotYet": {
			reason:    "the provider has not applied what Crossplane changed",
			objs:      []client.Object{machine("m", "ms", inProgress), xr("m", "rev-1", 3, 3, []string{"node"}, inProgress), composedObject("m-uid", 3, 2)},
			wantInMsg: "Object node: Synced for generation 2; waiting for generation 3",
		},
		"NotControlled": {
			reason:   "a reference to a resource the XR does not control is not followed",
			objs:     []client.Object{machine("m", "ms", inProgress), xr("m", "rev-1", 3, 3, []string{"node"}, inProgress), composedObject("someone-else", 3, 2)},
			wantDone: true,
		},
		"XRNotMarked": {
			reason:    "CAPI marks the XR before the Machine's hook is pending; until then, wait",
			objs:      []client.Object{machine("m", "ms", inProgress), xr("m", "rev-1", 3, 3, nil)},
			wantInMsg: "waiting for CAPI to write the change to CrossplaneMachine m",
		},
		"MachineNotUpdating": {
			reason:    "a call about a Machine CAPI is not updating in place is refused: the request is not trusted",
			objs:      []client.Object{machine("m", "ms"), xr("m", "rev-1", 3, 3, nil, inProgress)},
			wantFail:  true,
			wantInMsg: "is not being updated in place",
		},
		"NoMachine": {
			reason:   "a Machine that does not exist",
			wantFail: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newExtension(t, tc.objs...)
			req := &runtimehooksv1.UpdateMachineRequest{}
			req.Desired.Machine.Namespace, req.Desired.Machine.Name = ns, "m"
			resp := &runtimehooksv1.UpdateMachineResponse{}
			e.UpdateMachine(context.Background(), req, resp)
			switch {
			case tc.wantFail:
				if resp.Status != runtimehooksv1.ResponseStatusFailure {
					t.Errorf("%s\nUpdateMachine(): %s, want Failure", tc.reason, resp.Status)
				}
			case resp.Status != runtimehooksv1.ResponseStatusSuccess:
				t.Fatalf("%s\nUpdateMachine(): %s: %s", tc.reason, resp.Status, resp.Message)
			case tc.wantDone != (resp.RetryAfterSeconds == 0):
				t.Errorf("%s\nUpdateMachine(): retry after %ds (%s), want done %t", tc.reason, resp.RetryAfterSeconds, resp.Message, tc.wantDone)
			}
			if !strings.Contains(resp.Message, tc.wantInMsg) {
				t.Errorf("%s\nUpdateMachine(): message %q, want it to contain %q", tc.reason, resp.Message, tc.wantInMsg)
			}
		})
	}
}
