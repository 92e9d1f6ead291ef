package xr

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/access"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/composed"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/contracts"
)

// sent is one write the reconciler sent: its verb, the object's kind and
// name, and its body (a merge patch, an applied object, or empty).
type sent struct {
	verb, kind, name string
	body             string
}

// resolverFunc resolves credentials with a function.
type resolverFunc func(ref *infrav1.ProviderConfigReference) verdict.Verdict

func (f resolverFunc) Resolve(_ context.Context, _ string, ref *infrav1.ProviderConfigReference) (verdict.Verdict, error) {
	return f(ref), nil
}

var (
	granted = resolverFunc(func(*infrav1.ProviderConfigReference) verdict.Verdict {
		return verdict.Verdict{Ready: true, Reason: infrav1.CredentialsReadyReason}
	})
	notGranted = resolverFunc(func(*infrav1.ProviderConfigReference) verdict.Verdict {
		return verdict.Verdict{Reason: infrav1.ProviderConfigNotGrantedReason, Message: "spec.providerConfigRef: a grant is missing"}
	})
)

// composedGVK is what the test XRs compose: a kind the fake API serves.
var composedGVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

// testXR is a CrossplaneCluster of team-a that Crossplane reports ready with
// an endpoint, owned by Cluster demo; mutate changes it.
func testXR(mutate ...func(u *unstructured.Unstructured)) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": infrav1.GroupVersion.String(), "kind": infrav1.CrossplaneClusterKind,
		"metadata": map[string]any{
			"namespace": "team-a", "name": "demo", "uid": "xr-uid", "generation": int64(1),
			"labels": map[string]any{clusterv1.ClusterNameLabel: "demo"},
			"ownerReferences": []any{map[string]any{
				"apiVersion": clusterv1.GroupVersion.String(), "kind": "Cluster", "name": "demo", "uid": "cluster-uid",
			}},
		},
		"spec": map[string]any{
			"providerConfigRef": map[string]any{"apiGroup": "creds.example.org", "kind": "ProviderConfig", "name": "own"},
		},
		"status": map[string]any{
			"outputs": map[string]any{"controlPlaneEndpoint": map[string]any{"host": "lb.example.org", "port": int64(6443)}},
			"conditions": []any{
				map[string]any{"type": "Ready", "status": "True", "reason": "Available", "observedGeneration": int64(1), "lastTransitionTime": "2026-11-25T00:00:00Z"},
				map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "observedGeneration": int64(1), "lastTransitionTime": "2026-11-25T00:00:00Z"},
			},
		},
	}}
	for _, m := range mutate {
		m(u)
	}
	return u
}

func annotate(kv ...string) func(u *unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		a := u.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		for i := 0; i < len(kv); i += 2 {
			a[kv[i]] = kv[i+1]
		}
		u.SetAnnotations(a)
	}
}

func finalizers(f ...string) func(u *unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) { u.SetFinalizers(f) }
}

func provisioned(u *unstructured.Unstructured) {
	_ = unstructured.SetNestedField(u.Object, true, "status", "initialization", "provisioned")
	_ = unstructured.SetNestedField(u.Object, true, "status", "ready")
	_ = unstructured.SetNestedMap(u.Object, map[string]any{"host": "lb.example.org", "port": int64(6443)}, "spec", "controlPlaneEndpoint")
}

// selecting makes the XR select Compositions labelled backend=backend, compose
// with Composition ref (a revision of it), and record recorded as the
// selector it was last checked against ("": none recorded).
func selecting(backend, ref, recorded string) func(u *unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedMap(u.Object, map[string]any{
			"compositionSelector":    map[string]any{"matchLabels": map[string]any{"backend": backend}},
			"compositionRef":         map[string]any{"name": ref},
			"compositionRevisionRef": map[string]any{"name": ref + "-1"},
		}, "spec", "crossplane")
		if recorded != "" {
			annotate(SelectorAnnotation, recorded)(u)
		}
	}
}

// composition is Composition name, labelled backend=backend.
func composition(name, backend string) *xpextv1.Composition {
	return &xpextv1.Composition{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"backend": backend}}}
}

func unowned(u *unstructured.Unstructured) { u.SetOwnerReferences(nil) }

func deleting(u *unstructured.Unstructured) {
	now := metav1.NewTime(time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC))
	u.SetDeletionTimestamp(&now)
	u.SetFinalizers(append(u.GetFinalizers(), "composite.apiextensions.crossplane.io"))
}

// composing gives the XR one composed ConfigMap it controls.
func composing(u *unstructured.Unstructured) {
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "demo-part"}},
		"spec", "crossplane", "resourceRefs")
}

// testMachineXR is a CrossplaneMachine of team-a that Crossplane reports
// ready with a providerID, owned by Machine demo-md-0 of Cluster demo.
func testMachineXR(mutate ...func(u *unstructured.Unstructured)) *unstructured.Unstructured {
	u := testXR()
	u.SetKind(infrav1.CrossplaneMachineKind)
	u.SetName("demo-md-0")
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: "demo-md-0", UID: "machine-uid"}})
	_ = unstructured.SetNestedMap(u.Object, map[string]any{"providerID": "local:///team-a/demo-md-0"}, "status", "outputs")
	for _, m := range mutate {
		m(u)
	}
	return u
}

// testControlPlaneXR is a CrossplaneControlPlane of team-a that Crossplane
// reports ready with an endpoint, a version and its kubeconfig's Secret,
// owned by Cluster demo.
func testControlPlaneXR(mutate ...func(u *unstructured.Unstructured)) *unstructured.Unstructured {
	u := testXR()
	u.SetKind(infrav1.CrossplaneControlPlaneKind)
	_ = unstructured.SetNestedMap(u.Object, map[string]any{
		"controlPlaneEndpoint": map[string]any{"host": "api.example.org", "port": int64(443)},
		"version":              "v1.36.5",
		"kubeconfig":           map[string]any{"name": "demo-admin", "key": "kubeconfig"},
	}, "status", "outputs")
	for _, m := range mutate {
		m(u)
	}
	return u
}

// testPoolXR is a CrossplaneMachinePool of team-a that Crossplane reports
// ready with the given machines, owned by MachinePool demo-pool of Cluster
// demo.
func testPoolXR(ids []any, mutate ...func(u *unstructured.Unstructured)) *unstructured.Unstructured {
	u := testXR()
	u.SetKind(infrav1.CrossplaneMachinePoolKind)
	u.SetName("demo-pool")
	u.SetUID("pool-uid")
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachinePool", Name: "demo-pool", UID: "pool-uid"}})
	_ = unstructured.SetNestedMap(u.Object, map[string]any{"providerIDList": ids}, "status", "outputs")
	for _, m := range mutate {
		m(u)
	}
	return u
}

// poolComposed is a pool XR the bridge opened for 3 replicas and mapped 3
// machines of.
func poolComposed(u *unstructured.Unstructured) {
	_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "replicas")
	_ = unstructured.SetNestedMap(u.Object, map[string]any{"name": "demo-pool-bootstrap", "key": "value"}, "spec", "bootstrap", "dataSecretRef")
	_ = unstructured.SetNestedMap(u.Object, map[string]any{}, "spec", "network")
	_ = unstructured.SetNestedSlice(u.Object, threeMachines, "spec", "providerIDList")
	_ = unstructured.SetNestedField(u.Object, true, "status", "initialization", "provisioned")
	_ = unstructured.SetNestedField(u.Object, true, "status", "ready")
	_ = unstructured.SetNestedField(u.Object, int64(3), "status", "replicas")
	u.SetFinalizers([]string{infrav1.Finalizer})
}

var threeMachines = []any{"local:///team-a/demo-pool-a", "local:///team-a/demo-pool-b", "local:///team-a/demo-pool-c"}

// testMachinePool is MachinePool demo-pool of Cluster demo, of replicas,
// with its bootstrap data.
func testMachinePool(replicas int32) *clusterv1.MachinePool {
	mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo-pool", UID: "pool-uid"},
		Spec: clusterv1.MachinePoolSpec{ClusterName: "demo", Replicas: ptr.To(replicas)}}
	mp.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To("demo-pool-bootstrap")
	return mp
}

// provisionedCluster is Cluster demo whose infrastructure, CrossplaneCluster
// demo, is provisioned.
func provisionedCluster() *clusterv1.Cluster {
	c := testCluster(false)
	c.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.CrossplaneClusterKind, Name: "demo"}
	c.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	return c
}

// clusterCRD is the CRD of CrossplaneCluster as CAPI reads it to find the
// contract's version.
func clusterCRD() *extv1.CustomResourceDefinition {
	return &extv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "crossplaneclusters." + infrav1.GroupVersion.Group, Labels: infrav1.ContractLabels()}}
}

// adminKubeconfig is the Secret testControlPlaneXR's composition names.
func adminKubeconfig() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo-admin"},
		Data: map[string][]byte{"kubeconfig": adminConfig}}
}

// adminConfig is a usable kubeconfig of the control plane at 10.0.0.1.
var adminConfig = func() []byte {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["demo"] = &clientcmdapi.Cluster{Server: "https://10.0.0.1:6443"}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: "t0"}
	cfg.Contexts["demo"] = &clientcmdapi.Context{Cluster: "demo", AuthInfo: "admin"}
	cfg.CurrentContext = "demo"
	raw, err := clientcmd.Write(*cfg)
	if err != nil {
		panic(err)
	}
	return raw
}()

// testMachine is Machine demo-md-0 of Cluster demo; with bootstrap data it
// names its secret.
func testMachine(bootstrapData bool) *clusterv1.Machine {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo-md-0", UID: "machine-uid",
		Labels: map[string]string{clusterv1.ClusterNameLabel: "demo"}}, Spec: clusterv1.MachineSpec{ClusterName: "demo"}}
	if bootstrapData {
		m.Spec.Bootstrap.DataSecretName = ptr.To("demo-md-0-bootstrap")
	}
	return m
}

// bootstrapInjected is a machine XR the bridge already gave its bootstrap
// data reference.
func bootstrapInjected(u *unstructured.Unstructured) {
	_ = unstructured.SetNestedMap(u.Object, map[string]any{"name": "demo-md-0-bootstrap", "key": "value"}, "spec", "bootstrap", "dataSecretRef")
}

func composedPart() *corev1.ConfigMap {
	yes := true
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo-part",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: infrav1.CrossplaneClusterKind, Name: "demo", UID: "xr-uid", Controller: &yes}}}}
}

func testCluster(paused bool) *clusterv1.Cluster {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo", UID: "cluster-uid"}}
	if paused {
		c.Spec.Paused = &paused
	}
	return c
}

// managedCluster is Cluster demo whose control plane is CrossplaneControlPlane demo.
func managedCluster() *clusterv1.Cluster {
	c := testCluster(false)
	c.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{
		APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.CrossplaneControlPlaneKind, Name: "demo"}
	return c
}

// controlPlaneXRD is the XRD of CrossplaneControlPlane, labelled with its
// contract.
func controlPlaneXRD() *xpextv2.CompositeResourceDefinition {
	x := &xpextv2.CompositeResourceDefinition{ObjectMeta: metav1.ObjectMeta{
		Name: "crossplanecontrolplanes." + infrav1.GroupVersion.Group, Labels: map[string]string{infrav1.ContractLabel: infrav1.ContractControlPlane}}}
	x.Spec.Group = infrav1.GroupVersion.Group
	x.Spec.Names.Kind = infrav1.CrossplaneControlPlaneKind
	return x
}

func clusterWith(c metav1.Condition) *clusterv1.Cluster {
	cl := testCluster(false)
	c.LastTransitionTime = metav1.NewTime(time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC))
	cl.Status.Conditions = []metav1.Condition{c}
	return cl
}

// outcome is what one reconcile returned and did.
type outcome struct {
	result ctrl.Result
	err    error
	writes []sent
	events []string
	// waits: the XR is counted in capxp_xrs_waiting afterwards.
	waits bool
}

// reconcileWith runs one reconcile of the XR against a fake API holding
// objs, what it composed behind res (nil: the fake API's, read through
// composed.New), and returns what it returned and did.
func reconcileWith(t *testing.T, creds credentials.Resolver, res composed.Resources, xr *unstructured.Unstructured, objs ...client.Object) outcome {
	t.Helper()
	var writes []sent
	record := func(verb string, obj any, body any) {
		o, _ := obj.(client.Object)
		kind, name := "", ""
		if o != nil {
			kind, name = o.GetObjectKind().GroupVersionKind().Kind, o.GetName()
			if kind == "" {
				kind = fmt.Sprintf("%T", o)
			}
		}
		b := ""
		switch v := body.(type) {
		case client.Patch:
			raw, err := v.Data(o)
			if err != nil {
				t.Fatal(err)
			}
			b = string(raw)
		case runtime.ApplyConfiguration:
			raw, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			b = string(raw)
			var u unstructured.Unstructured
			if json.Unmarshal(raw, &u.Object) == nil {
				kind, name = u.GetKind(), u.GetName()
			}
		}
		writes = append(writes, sent{verb, kind, name, b})
	}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{infrav1.GroupVersion})
	for _, gvk := range []schema.GroupVersionKind{
		xr.GroupVersionKind(), composedGVK, infrav1.GroupVersion.WithKind(infrav1.CrossplaneClusterKind),
		infrav1.GroupVersion.WithKind(infrav1.CrossplaneControlPlaneKind),
		clusterv1.GroupVersion.WithKind("Cluster"), clusterv1.GroupVersion.WithKind("Machine"), clusterv1.GroupVersion.WithKind("MachinePool"),
	} {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	c := fake.NewClientBuilder().WithScheme(testScheme()).WithRESTMapper(mapper).WithObjects(append(objs, xr)...).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(_ context.Context, _ client.WithWatch, obj client.Object, p client.Patch, _ ...client.PatchOption) error {
			record("patch", obj, p)
			return nil
		},
		Apply: func(_ context.Context, _ client.WithWatch, obj runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
			record("apply", nil, obj)
			return nil
		},
		SubResourceApply: func(_ context.Context, _ client.Client, sub string, obj runtime.ApplyConfiguration, _ ...client.SubResourceApplyOption) error {
			record("apply "+sub, nil, obj)
			return nil
		},
		SubResourcePatch: func(_ context.Context, _ client.Client, sub string, obj client.Object, p client.Patch, _ ...client.SubResourcePatchOption) error {
			record("patch "+sub, obj, p)
			return nil
		},
		Delete: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.DeleteOption) error {
			record("delete", obj, nil)
			return nil
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			record("create", obj, nil)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.UpdateOption) error {
			record("update", obj, nil)
			return nil
		},
	}).Build()
	reads := access.NewReads(c)
	reads.Readable(schema.GroupResource{Resource: "configmaps"}, schema.GroupResource{Group: infrav1.GroupVersion.Group, Resource: "crossplaneclusters"})
	rec := events.NewFakeRecorder(10)
	name := map[string]string{
		infrav1.CrossplaneClusterKind:      infrav1.ContractInfraCluster,
		infrav1.CrossplaneMachineKind:      infrav1.ContractInfraMachine,
		infrav1.CrossplaneMachinePoolKind:  infrav1.ContractInfraMachinePool,
		infrav1.CrossplaneControlPlaneKind: infrav1.ContractControlPlane,
	}[xr.GetKind()]
	contract, err := contracts.New(name, contracts.Options{Client: c, Missing: reads.Missing})
	if err != nil {
		t.Fatal(err)
	}
	if res == nil {
		res = composed.New(c, xr.GroupVersionKind(), nopWatcher{}, reads.Missing, crdLabeller{client: c, labels: &crdLabels{}})
	}
	r := &xrReconciler{
		client: c, gvk: xr.GroupVersionKind(), contract: contract, recorder: rec,
		credentials: creds, access: reads, tracker: nopWatcher{}, composed: res, waiting: newWaitingXRs(time.Now),
	}
	ctx := ctrl.LoggerInto(t.Context(), ctrl.Log)
	result, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: xr.GetNamespace(), Name: xr.GetName()}})
	close(rec.Events)
	var evs []string
	for e := range rec.Events {
		evs = append(evs, e)
	}
	_, waits := r.waiting.xrs[xr.GetUID()]
	return outcome{result: result, err: err, writes: writes, events: evs, waits: waits}
}

// nopWatcher starts no watch: a unit test has no cache.
type nopWatcher struct{}

func (nopWatcher) Watch(logr.Logger, client.Object, handler.EventHandler, ...predicate.Predicate) error {
	return nil
}

// want is one expected write: its verb, kind and name, and what its body
// must contain.
type want struct {
	verb, kind, name string
	contains         []string
}

// checkWrites compares each write by verb, kind and name, and checks that
// it holds the parts of its body the case names.
func checkWrites(t *testing.T, reason string, wants []want, writes []sent) {
	t.Helper()
	got := make([]want, 0, len(writes))
	for i, w := range writes {
		g := want{verb: w.verb, kind: w.kind, name: w.name}
		if i < len(wants) {
			for _, part := range wants[i].contains {
				if strings.Contains(w.body, part) {
					g.contains = append(g.contains, part)
				}
			}
		}
		got = append(got, g)
	}
	if diff := cmp.Diff(wants, got, cmp.AllowUnexported(want{}), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s\nwrites -want +got:\n%s\nbodies:\n%s", reason, diff, bodies(writes))
	}
}

func TestReconcile(t *testing.T) {
	paused := infrav1.CrossplanePausedAnnotation
	cases := map[string]struct {
		reason string
		creds  credentials.Resolver
		xr     *unstructured.Unstructured
		objs   []client.Object
		writes []want
		events []string
		// waits: the XR counts in capxp_xrs_waiting afterwards.
		waits bool
	}{
		"Normal": {
			reason: "an XR held at admission, owned, granted and ready is released, finalized, given its endpoint and marked provisioned; a ready verdict the Cluster never had is CAPI's own conditions' to show",
			creds:  granted,
			xr:     testXR(annotate(paused, "true")),
			objs:   []client.Object{testCluster(false)},
			writes: []want{
				{"patch", "CrossplaneCluster", "demo", []string{`"crossplane.io/paused":null`, `"finalizers":["capxp.dev/bridge"]`, `"controlPlaneEndpoint":{"host":"lb.example.org","port":6443}`}},
				{"apply status", "CrossplaneCluster", "demo", []string{`"provisioned":true`, `"ready":true`}},
			},
			events: []string{"Normal Provisioned Infrastructure provisioned; control plane endpoint lb.example.org:6443"},
		},
		"UnderAManagedControlPlane": {
			reason: "a cluster XR whose Cluster's control plane is an XR of a ControlPlane XRD needs no endpoint of its own: the service's is the cluster's, and CAPI takes it from the control plane",
			creds:  granted,
			xr: testXR(annotate(paused, "true"), func(u *unstructured.Unstructured) {
				unstructured.RemoveNestedField(u.Object, "status", "outputs", "controlPlaneEndpoint")
			}),
			objs: []client.Object{managedCluster(), controlPlaneXRD()},
			writes: []want{
				{"patch", "CrossplaneCluster", "demo", []string{`"crossplane.io/paused":null`, `"finalizers":["capxp.dev/bridge"]`}},
				{"apply status", "CrossplaneCluster", "demo", []string{`"provisioned":true`, `"ready":true`}},
			},
			events: []string{"Normal Provisioned Infrastructure provisioned; the managed control plane provides the endpoint"},
		},
		"UnderAnotherControlPlane": {
			reason: "under a control plane of a kind no ControlPlane XRD defines (kubeadm's), the cluster XR must report the endpoint",
			waits:  true,
			creds:  granted,
			xr: testXR(annotate(paused, "true"), func(u *unstructured.Unstructured) {
				unstructured.RemoveNestedField(u.Object, "status", "outputs", "controlPlaneEndpoint")
			}),
			objs: []client.Object{func() client.Object {
				c := managedCluster()
				c.Spec.ControlPlaneRef.APIGroup, c.Spec.ControlPlaneRef.Kind = "controlplane.cluster.x-k8s.io", "KubeadmControlPlane"
				return c
			}(), controlPlaneXRD()},
			writes: []want{
				{"patch", "CrossplaneCluster", "demo", []string{`"crossplane.io/paused":null`, `"finalizers":["capxp.dev/bridge"]`}},
				{"apply status", "Cluster", "demo", []string{`"reason":"MissingOutputs"`, `status.outputs.controlPlaneEndpoint: Required value`}},
			},
		},
		"ProvisionedAndUnchanged": {
			reason: "nothing changed, nothing is sent",
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned),
			objs:   []client.Object{testCluster(false)},
		},
		"SelectorRecorded": {
			reason: "the selector a cluster XR composes with is recorded, so that a later change of it is seen",
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, selecting("byo", "local", "")),
			objs:   []client.Object{testCluster(false), composition("local", "local")},
			writes: []want{
				{"patch", "CrossplaneCluster", "demo", []string{`"capxp.dev/composition-selector":"backend=byo"`}},
			},
		},
		"Reselected": {
			reason: "a changed selector that its Composition no longer matches releases the Composition for Crossplane to select again (a Cluster rebased onto another class)",
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, selecting("byo", "local", "backend=local")),
			objs:   []client.Object{testCluster(false), composition("local", "local")},
			writes: []want{
				{"patch", "CrossplaneCluster", "demo", []string{`"capxp.dev/composition-selector":"backend=byo"`, `"compositionRef":null`, `"compositionRevisionRef":null`}},
			},
			events: []string{"Normal CompositionReselected Composition local does not match spec.crossplane.compositionSelector (backend=byo): released it for Crossplane to select again"},
		},
		"ReselectedStillMatching": {
			reason: "a changed selector that its Composition still matches keeps it",
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, selecting("byo", "byo", "backend=local")),
			objs:   []client.Object{testCluster(false), composition("byo", "byo")},
			writes: []want{
				{"patch", "CrossplaneCluster", "demo", []string{`"capxp.dev/composition-selector":"backend=byo"`}},
			},
		},
		"ReadyAgainAfterAVerdict": {
			reason: "a Cluster that was told its infrastructure is not ready is told it is again",
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned),
			objs:   []client.Object{clusterWith(metav1.Condition{Type: infrav1.CrossplaneInfrastructureReadyCondition, Status: metav1.ConditionFalse, Reason: infrav1.ProviderConfigNotGrantedReason})},
			writes: []want{
				{"apply status", "Cluster", "demo", []string{`"type":"CrossplaneInfrastructureReady"`, `"status":"True"`}},
			},
		},
		"MachineWaitsForTheClusterInfrastructure": {
			reason: "a machine XR stays held until its Cluster's infrastructure is provisioned; CAPI's own conditions say so on the Machine, so nothing is written",
			waits:  true,
			creds:  granted,
			xr:     testMachineXR(annotate(paused, "true")),
			objs:   []client.Object{testCluster(false), testMachine(true)},
		},
		"MachineWithAPresetBootstrapReference": {
			reason: "a bootstrap data reference preset to another Machine's data keeps the XR held; the Machine's condition and a warning say why",
			waits:  true,
			creds:  granted,
			xr: testMachineXR(annotate(paused, "true"), func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedMap(u.Object, map[string]any{"name": "someone-elses", "key": "value"}, "spec", "bootstrap", "dataSecretRef")
			}),
			objs: []client.Object{testCluster(false), testMachine(true)},
			writes: []want{
				{"apply status", "Machine", "demo-md-0", []string{`"status":"False"`, `"reason":"InvalidBootstrapDataRef"`}},
			},
			events: []string{"Warning InvalidBootstrapDataRef spec.bootstrap.dataSecretRef someone-elses/value is set by the bridge, not preset: Machine demo-md-0's bootstrap data is demo-md-0-bootstrap/value; recreate the machine without it"},
		},
		"MachineNormal": {
			reason: "a machine XR given its bootstrap data is released, given its providerID and marked provisioned; CAPI reports the provisioning on the Machine",
			creds:  granted,
			xr:     testMachineXR(annotate(paused, "true"), bootstrapInjected),
			objs:   []client.Object{testCluster(false), testMachine(true)},
			writes: []want{
				{"patch", "CrossplaneMachine", "demo-md-0", []string{`"crossplane.io/paused":null`, `"providerID":"local:///team-a/demo-md-0"`}},
				{"apply status", "CrossplaneMachine", "demo-md-0", []string{`"provisioned":true`, `"ready":true`}},
			},
		},
		"PoolNormal": {
			reason: "a pool XR held at admission opens once its cluster is provisioned and its bootstrap data exists: released with its replicas, bootstrap reference and network, given the machines it reports, provisioned with their count",
			creds:  granted,
			xr:     testPoolXR(threeMachines, annotate(paused, "true")),
			objs:   []client.Object{provisionedCluster(), testXR(), clusterCRD(), testMachinePool(3)},
			writes: []want{
				{"patch", "CrossplaneMachinePool", "demo-pool", []string{`"crossplane.io/paused":null`, `"replicas":3`,
					`"dataSecretRef":{"key":"value","name":"demo-pool-bootstrap"}`, `"providerIDList":["local:///team-a/demo-pool-a","local:///team-a/demo-pool-b","local:///team-a/demo-pool-c"]`}},
				{"apply status", "CrossplaneMachinePool", "demo-pool", []string{`"provisioned":true`, `"ready":true`, `"replicas":3`}},
			},
		},
		"PoolWaitsForTheClusterInfrastructure": {
			reason: "a pool XR stays held until its Cluster's infrastructure is provisioned; CAPI's own conditions say so on the MachinePool",
			waits:  true,
			creds:  granted,
			xr:     testPoolXR(nil, annotate(paused, "true")),
			objs:   []client.Object{testCluster(false), testMachinePool(3)},
		},
		"PoolScaled": {
			reason: "a MachinePool scaled up scales its XR, and only the replicas are written",
			creds:  granted,
			xr:     testPoolXR(threeMachines, poolComposed),
			objs:   []client.Object{provisionedCluster(), testXR(), clusterCRD(), testMachinePool(5)},
			writes: []want{
				{"patch", "CrossplaneMachinePool", "demo-pool", []string{`"spec":{"replicas":5}`}},
			},
		},
		"PoolReportsItsNewMachines": {
			reason: "the machines a pool reports after scaling go to spec.providerIDList and their count to status.replicas",
			creds:  granted,
			xr: testPoolXR(append(threeMachines[:3:3], "local:///team-a/demo-pool-d"), poolComposed, func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, int64(4), "spec", "replicas")
			}),
			objs: []client.Object{provisionedCluster(), testXR(), clusterCRD(), testMachinePool(4)},
			writes: []want{
				{"patch", "CrossplaneMachinePool", "demo-pool", []string{`"providerIDList":["local:///team-a/demo-pool-a","local:///team-a/demo-pool-b","local:///team-a/demo-pool-c","local:///team-a/demo-pool-d"]`}},
				{"apply status", "CrossplaneMachinePool", "demo-pool", []string{`"replicas":4`}},
			},
		},
		"ControlPlaneNormal": {
			reason: "a control plane XR ready with its outputs gets the cluster's kubeconfig Secret first, then its endpoint, and is initialized, managed, at the version it serves",
			creds:  granted,
			xr:     testControlPlaneXR(annotate(paused, "true")),
			objs:   []client.Object{provisionedCluster(), testXR(), clusterCRD(), adminKubeconfig()},
			writes: []want{
				{"create", "*v1.Secret", "demo-kubeconfig", nil},
				{"patch", "CrossplaneControlPlane", "demo", []string{`"crossplane.io/paused":null`, `"controlPlaneEndpoint":{"host":"api.example.org","port":443}`}},
				{"apply status", "CrossplaneControlPlane", "demo", []string{`"controlPlaneInitialized":true`, `"externalManagedControlPlane":true`, `"version":"v1.36.5"`}},
			},
			events: []string{
				"Normal KubeconfigWritten Wrote Secret demo-kubeconfig from Secret demo-admin",
				"Normal Provisioned Control plane control plane v1.36.5 initialized at api.example.org:443",
			},
		},
		"ControlPlaneWaitsForItsKubeconfig": {
			reason: "until the Secret its composition names exists, a control plane is not initialized, and the Cluster's own condition for it says why",
			waits:  true,
			creds:  granted,
			xr:     testControlPlaneXR(annotate(paused, "true")),
			objs:   []client.Object{provisionedCluster(), testXR(), clusterCRD()},
			writes: []want{
				{"patch", "CrossplaneControlPlane", "demo", []string{`"crossplane.io/paused":null`}},
				{"apply status", "Cluster", "demo", []string{`"type":"CrossplaneControlPlaneReady"`, `"reason":"WaitingForKubeconfig"`}},
			},
		},
		"ControlPlaneWaitsForClusterInfrastructure": {
			reason: "a service is placed in the cluster's network: the control plane XR stays held until the cluster's infrastructure is provisioned; CAPI's own conditions say so on the Cluster, so nothing is written",
			waits:  true,
			creds:  granted,
			xr:     testControlPlaneXR(annotate(paused, "true")),
			objs:   []client.Object{testCluster(false)},
		},
		"PausedByCAPI": {
			reason: "a paused Cluster pauses its XR for Crossplane; nothing else is written",
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned),
			objs:   []client.Object{testCluster(true)},
			writes: []want{
				{"patch", "CrossplaneCluster", "demo", []string{`"crossplane.io/paused":"true"`}},
			},
		},
		"HeldForCredentials": {
			reason: "credentials the namespace may not use keep the XR held, marked as the bridge's hold, and say why on the Cluster and in an event",
			waits:  true,
			creds:  notGranted,
			xr:     testXR(annotate(paused, "true")),
			objs:   []client.Object{testCluster(false)},
			writes: []want{
				{"patch", "CrossplaneCluster", "demo", []string{`"capxp.dev/held-for-credentials":"true"`}},
				{"apply status", "Cluster", "demo", []string{`"reason":"NotGranted"`, `a grant is missing`}},
			},
			events: []string{"Warning NotGranted spec.providerConfigRef: a grant is missing"},
		},
		"HeldForCredentialsPausesWhatWasComposed": {
			reason: "a revoked grant pauses the composed resources too, marked as the bridge's",
			creds:  notGranted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, composing),
			objs:   []client.Object{testCluster(false), composedPart()},
			writes: []want{
				{"patch", "ConfigMap", "demo-part", []string{`"capxp.dev/held-for-credentials":"true"`, `"crossplane.io/paused":"true"`}},
				{"patch", "CrossplaneCluster", "demo", []string{`"capxp.dev/held-for-credentials":"true"`, `"crossplane.io/paused":"true"`}},
				{"apply status", "Cluster", "demo", []string{`"reason":"NotGranted"`}},
			},
			events: []string{"Warning NotGranted spec.providerConfigRef: a grant is missing"},
		},
		"ReleasedBeforeWhatItComposedWasSeenHeld": {
			reason: "an XR released on a read of its composed resources older than their hold resumes them once the newer read arrives, though the XR is no longer paused",
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, composing),
			objs: []client.Object{testCluster(false), func() client.Object {
				p := composedPart()
				p.Annotations = map[string]string{infrav1.CredentialsHoldAnnotation: "true", paused: "true"}
				return p
			}()},
			writes: []want{
				{"patch", "ConfigMap", "demo-part", []string{`"annotations":null`}},
				// A provisioned XR composing resources blocks a move until
				// they are guarded (its first such reconcile).
				{"patch", "CrossplaneCluster", "demo", []string{`"clusterctl.cluster.x-k8s.io/block-move":""`}},
			},
		},
		"ExternallyManaged": {
			reason: "an externally managed XR is granted: the hold it was admitted with is lifted, its finalizer dropped, its contract fields and Cluster left alone",
			creds:  granted,
			xr:     testXR(annotate(paused, "true", clusterv1.ManagedByAnnotation, "someone"), finalizers(infrav1.Finalizer)),
			objs:   []client.Object{testCluster(false)},
			writes: []want{
				{"patch", "CrossplaneCluster", "demo", []string{`"crossplane.io/paused":null`, `"finalizers":[]`}},
			},
		},
		"ExternallyManagedNotGranted": {
			reason: "managed-by does not skip the credentials: held, with an event, and no Cluster condition",
			creds:  notGranted,
			xr:     testXR(annotate(paused, "true", clusterv1.ManagedByAnnotation, "someone")),
			objs:   []client.Object{testCluster(false)},
			writes: []want{
				{"patch", "CrossplaneCluster", "demo", []string{`"capxp.dev/held-for-credentials":"true"`}},
			},
			events: []string{"Warning NotGranted spec.providerConfigRef: a grant is missing"},
		},
		"UnownedGranted": {
			reason: "an XR CAPI does not own yet, granted, is released to Crossplane",
			waits:  true,
			creds:  granted,
			xr:     testXR(unowned, annotate(paused, "true")),
			writes: []want{
				{"patch", "CrossplaneCluster", "demo", []string{`"crossplane.io/paused":null`}},
			},
		},
		"UnownedNotGranted": {
			reason: "an XR CAPI does not own yet is checked all the same, and stays held",
			waits:  true,
			creds:  notGranted,
			xr:     testXR(unowned, annotate(paused, "true")),
			writes: []want{
				{"patch", "CrossplaneCluster", "demo", []string{`"capxp.dev/held-for-credentials":"true"`}},
			},
			events: []string{"Warning NotGranted spec.providerConfigRef: a grant is missing"},
		},
		"Deleting": {
			reason: "a deleted XR's composed resources are deleted first; its finalizer stays until they are gone",
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, composing, deleting),
			objs:   []client.Object{testCluster(false), composedPart()},
			writes: []want{
				{"delete", "ConfigMap", "demo-part", nil},
				{"apply status", "Cluster", "demo", []string{`"reason":"Deleting"`, `ConfigMap/demo-part`}},
			},
		},
		"DeletingWhileNotGranted": {
			reason: "what a revoked XR composed stays paused while it is deleted, and the Cluster says why",
			creds:  notGranted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, composing, deleting),
			objs:   []client.Object{testCluster(false), composedPart()},
			writes: []want{
				{"patch", "ConfigMap", "demo-part", []string{`"crossplane.io/paused":"true"`}},
				{"delete", "ConfigMap", "demo-part", nil},
				{"apply status", "Cluster", "demo", []string{`"reason":"Deleting"`, `stay paused until a grant lets the provider delete them`}},
			},
		},
		"DeletingWhenNothingIsLeft": {
			reason: "with every composed resource gone, the finalizer goes",
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, deleting),
			objs:   []client.Object{testCluster(false)},
			writes: []want{
				{"patch", "CrossplaneCluster", "demo", []string{`"finalizers":["composite.apiextensions.crossplane.io"]`}},
			},
		},
		"DeletingWithAForeignReference": {
			reason: "a resource reference to what the XR does not control is not deleted, and said so once",
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, composing, deleting),
			objs: []client.Object{testCluster(false), func() client.Object {
				o := composedPart()
				o.OwnerReferences = nil
				return o
			}()},
			writes: []want{
				{"patch", "CrossplaneCluster", "demo", []string{`"finalizers":["composite.apiextensions.crossplane.io"]`}},
				{"apply status", "Cluster", "demo", []string{`"reason":"NotControlled"`}},
			},
			events: []string{"Warning NotControlled Not deleting ConfigMap/demo-part: spec.crossplane.resourceRefs names them but this composite resource does not control them"},
		},
		"DeletingWithAForeignReferenceAndWaiting": {
			reason: "a foreign reference is said in an event also while the deletion waits for what the XR controls, whose wait is the verdict",
			creds:  granted,
			xr: testXR(finalizers(infrav1.Finalizer), provisioned, deleting, func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedSlice(u.Object, []any{
					map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "demo-part"},
					map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "not-mine"},
				}, "spec", "crossplane", "resourceRefs")
			}),
			objs: []client.Object{testCluster(false), composedPart(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "not-mine"}}},
			writes: []want{
				{"delete", "ConfigMap", "demo-part", nil},
				{"apply status", "Cluster", "demo", []string{`"reason":"Deleting"`}},
			},
			events: []string{"Warning NotControlled Not deleting ConfigMap/not-mine: spec.crossplane.resourceRefs names them but this composite resource does not control them"},
		},
		"DeletedWhilePaused": {
			reason: "an XR deleted while its Cluster is paused (clusterctl move) is paused and nothing it composed is deleted",
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, composing, deleting),
			objs:   []client.Object{testCluster(true), composedPart()},
			writes: []want{
				{"patch", "CrossplaneCluster", "demo", []string{`"crossplane.io/paused":"true"`}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := reconcileWith(t, tc.creds, nil, tc.xr, tc.objs...)
			if o.err != nil {
				t.Fatalf("Reconcile: %v", o.err)
			}
			checkWrites(t, tc.reason, tc.writes, o.writes)
			if diff := cmp.Diff(tc.events, o.events); diff != "" {
				t.Errorf("%s\nevents -want +got:\n%s", tc.reason, diff)
			}
			if o.waits != tc.waits {
				t.Errorf("%s\ncounted as waiting: %t, want %t", tc.reason, o.waits, tc.waits)
			}
		})
	}
}

func bodies(ws []sent) string {
	var b strings.Builder
	for _, w := range ws {
		fmt.Fprintf(&b, "  %s %s %s: %s\n", w.verb, w.kind, w.name, w.body)
	}
	return b.String()
}

// testScheme is the manager's scheme: the kinds the Contracts read.
func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(contracts.AddToScheme(s))
	return s
}
