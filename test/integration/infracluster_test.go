package integration

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

var clusterGVK = infrav1.GroupVersion.WithKind(infrav1.CrossplaneClusterKind)

// stack runs CAPI's reconcilers and the bridge for the duration of one test;
// Crossplane and the provider run for the whole package.
func stack(t *testing.T) *envtest.Manager {
	t.Helper()
	return stackWith(t, controllers.Options{})
}

// stackWith runs the stack with the bridge's options.
func stackWith(t *testing.T, o controllers.Options) *envtest.Manager {
	t.Helper()
	g := NewWithT(t)
	capi, err := env.StartCAPI(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	bridge, err := env.StartBridgeAs(ctx, env.Config, o)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		g.Expect(bridge.Stop()).To(Succeed())
		g.Expect(capi.Stop()).To(Succeed())
		keepLogs(t, bridge)
	})
	return bridge
}

// keepLogs writes the bridge's log lines beside Crossplane's when the test
// failed: what it decided is the first thing a failure asks.
func keepLogs(t *testing.T, bridge *envtest.Manager) {
	if !t.Failed() || bridge.Logs == nil {
		return
	}
	path := filepath.Join(logDir, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+".bridge.log")
	if err := bridge.Logs.WriteFile(path); err != nil {
		t.Logf("cannot keep the bridge's logs: %v", err)
		return
	}
	t.Logf("the bridge's logs are in %s", path)
}

// script is what the provider observes for an XR once its Stub is ready,
// and the Composition maps into the XR's status.
func script(status map[string]any) string {
	b, err := json.Marshal(status)
	if err != nil {
		panic(err) // the tests' own literals
	}
	return string(b)
}

var goodStatus = map[string]any{
	"outputs": map[string]any{"controlPlaneEndpoint": map[string]any{"host": "lb-1.elb.eu-west-1.amazonaws.com", "port": 6443}},
	"failureDomains": []any{
		map[string]any{"name": "eu-west-1a", "controlPlane": true},
		map[string]any{"name": "eu-west-1b", "controlPlane": true},
	},
}

// newCluster creates a CAPI Cluster and the XR it points at, of any kind.
func newCluster(t *testing.T, ns, name string, gvk schema.GroupVersionKind, annotations map[string]string) (*clusterv1.Cluster, *unstructured.Unstructured) {
	t.Helper()
	g := NewWithT(t)
	xr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	xr.SetGroupVersionKind(gvk)
	xr.SetNamespace(ns)
	xr.SetName(name)
	xr.SetAnnotations(annotations)
	// A kind adapted moments ago may still be answered with 503 while the
	// API server's admission policies learn its type, also after a first
	// request was admitted (the bridge updates the policies as other kinds
	// are adapted); users retry.
	var err error
	g.Eventually(func(g Gomega) {
		err = env.Client.Create(ctx, xr)
		g.Expect(apierrors.IsServiceUnavailable(err)).To(BeFalse(), "%v", err)
	}, timeout, interval).Should(Succeed())
	g.Expect(err).NotTo(HaveOccurred())
	cluster := capiCluster(ns, name)
	cluster.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: gvk.Group, Kind: gvk.Kind, Name: name}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	return cluster, xr
}

// capiCluster is a Cluster whose infrastructure is the CrossplaneCluster of
// the same name.
func capiCluster(ns, name string) *clusterv1.Cluster {
	return &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: clusterGVK.Group, Kind: clusterGVK.Kind, Name: name,
		}},
	}
}

func getXR(g Gomega, xr *unstructured.Unstructured) *unstructured.Unstructured {
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(xr.GroupVersionKind())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(xr), got)).To(Succeed())
	return got
}

func getCluster(g Gomega, c *clusterv1.Cluster) *clusterv1.Cluster {
	got := &clusterv1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
	return got
}

func xrCondition(u *unstructured.Unstructured, t string) map[string]any {
	cs, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok && m["type"] == t {
			return m
		}
	}
	return nil
}

func provisioned(u *unstructured.Unstructured) bool {
	p, _, _ := unstructured.NestedBool(u.Object, "status", "initialization", "provisioned")
	r, _, _ := unstructured.NestedBool(u.Object, "status", "ready")
	return p && r
}

// crossplaneConditionsOnly asserts that every condition on an XR is one
// Crossplane writes: the bridge writes none there, so it never fights
// Crossplane over them.
func crossplaneConditionsOnly(g Gomega, u *unstructured.Unstructured) {
	cs, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range cs {
		m, _ := c.(map[string]any)
		g.Expect(m["type"]).To(BeElementOf("Ready", "Synced", "Responsive"), "condition %v on the XR is not Crossplane's", m)
	}
}

// infraCondition is the bridge's verdict on a CAPI object.
func infraCondition(g Gomega, o conditions.Getter) *metav1.Condition {
	c := conditions.Get(o, infrav1.CrossplaneInfrastructureReadyCondition)
	g.Expect(c).NotTo(BeNil(), "no %s condition", infrav1.CrossplaneInfrastructureReadyCondition)
	return c
}

// noVerdict asserts that the bridge wrote no condition on a CAPI object:
// CAPI's own conditions say all there is to say.
func noVerdict(g Gomega, o conditions.Getter) {
	g.Expect(conditions.Get(o, infrav1.CrossplaneInfrastructureReadyCondition)).To(BeNil(), "the bridge's condition on a happy path")
}

// goodCluster is a new namespace and a Cluster in it whose XR Crossplane
// reports ready.
func goodCluster(t *testing.T, name string) (string, *clusterv1.Cluster, *unstructured.Unstructured) {
	t.Helper()
	ns := namespace(t)
	cluster, xr := newCluster(t, ns, name, clusterGVK, map[string]string{envtest.ObserveAnnotation: script(goodStatus)})
	return ns, cluster, xr
}

// provisionedCluster is a goodCluster once its XR is provisioned.
func provisionedCluster(t *testing.T, name string) (string, *clusterv1.Cluster, *unstructured.Unstructured) {
	t.Helper()
	ns, cluster, xr := goodCluster(t, name)
	NewWithT(t).Eventually(func(g Gomega) { g.Expect(provisioned(getXR(g, xr))).To(BeTrue()) }, timeout, interval).Should(Succeed())
	return ns, cluster, xr
}

// A CAPI Cluster whose composition reports an endpoint becomes provisioned,
// with the endpoint and failure domains, and says so in its conditions.
func TestClusterInfrastructureIsProvisioned(t *testing.T) {
	stack(t)
	g := NewWithT(t)
	_, cluster, xr := goodCluster(t, "alpha")

	g.Eventually(func(g Gomega) {
		c := getCluster(g, cluster)
		g.Expect(ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false)).To(BeTrue())
		g.Expect(c.Spec.ControlPlaneEndpoint).To(Equal(clusterv1.APIEndpoint{Host: "lb-1.elb.eu-west-1.amazonaws.com", Port: 6443}))
		g.Expect(c.Status.FailureDomains).To(HaveLen(2))
		g.Expect(conditions.IsTrue(c, clusterv1.ClusterInfrastructureReadyCondition)).To(BeTrue())
		noVerdict(g, c)
	}, timeout, interval).Should(Succeed())

	got := getXR(g, xr)
	g.Expect(provisioned(got)).To(BeTrue())
	g.Expect(got.GetFinalizers()).To(ContainElement(infrav1.Finalizer))
	crossplaneConditionsOnly(g, got)
	g.Expect(xrCondition(got, "Ready")).To(HaveKeyWithValue("reason", "Available"))
}

// A failing composition's own message reaches the CAPI Cluster's conditions,
// and the infrastructure is never reported provisioned.
func TestCompositionFailureSurfacesOnTheCluster(t *testing.T) {
	stack(t)
	g := NewWithT(t)
	ns := namespace(t)
	cluster, xr := newCluster(t, ns, "failing", clusterGVK, map[string]string{
		envtest.ObserveAnnotation: script(goodStatus),
		envtest.FailAnnotation:    "m7i.nonexistent",
	})
	// function-patch-and-transform's own words.
	const msg = `cannot render composed resource "stub" "FromCompositeFieldPath" patch at index 2: transform at index 0 returned error: map transform could not resolve: key m7i.nonexistent is not found in map`

	g.Eventually(func(g Gomega) {
		c := conditions.Get(getCluster(g, cluster), infrav1.CrossplaneInfrastructureReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(infrav1.CompositionFailedReason))
		g.Expect(c.Message).To(ContainSubstring(msg))
	}, timeout, interval).Should(Succeed())

	// No fight: Crossplane retries the failing pipeline at its own pace and
	// its watch circuit stays closed, because nothing the bridge writes
	// wakes it.
	g.Consistently(func(g Gomega) {
		got := getXR(g, xr)
		g.Expect(provisioned(got)).To(BeFalse())
		crossplaneConditionsOnly(g, got)
		responsive(g, got)
		g.Expect(ptr.Deref(getCluster(g, cluster).Status.Initialization.InfrastructureProvisioned, false)).To(BeFalse())
	}, "5s", interval).Should(Succeed())

	// Fixed, it composes at once: Crossplane was never throttled.
	change(g, xr, func() {
		a := xr.GetAnnotations()
		delete(a, envtest.FailAnnotation)
		xr.SetAnnotations(a)
	})
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.IsTrue(getCluster(g, cluster), infrav1.CrossplaneInfrastructureReadyCondition)).To(BeTrue())
	}, 15*time.Second, interval).Should(Succeed())
	responsive(g, getXR(g, xr))
}

// Malformed outputs give a condition naming the field and the value, and the
// infrastructure is never reported provisioned.
func TestBadOutputsGiveAClearCondition(t *testing.T) {
	stack(t)
	ns := namespace(t)
	cases := map[string]struct {
		status map[string]any
		reason string
		want   string
	}{
		"port-zero": {
			status: map[string]any{"outputs": map[string]any{"controlPlaneEndpoint": map[string]any{"host": "lb.example.org", "port": 0}}},
			reason: infrav1.InvalidOutputsReason,
			want:   "status.outputs.controlPlaneEndpoint.port: Invalid value: 0: must be between 1 and 65535",
		},
		"port-too-high": {
			status: map[string]any{"outputs": map[string]any{"controlPlaneEndpoint": map[string]any{"host": "lb.example.org", "port": 70000}}},
			reason: infrav1.InvalidOutputsReason,
			want:   "status.outputs.controlPlaneEndpoint.port: Invalid value: 70000",
		},
		"empty-host": {
			status: map[string]any{"outputs": map[string]any{"controlPlaneEndpoint": map[string]any{"host": "", "port": 6443}}},
			reason: infrav1.InvalidOutputsReason,
			want:   "status.outputs.controlPlaneEndpoint.host: Required value",
		},
		"duplicate-failure-domains": {
			status: map[string]any{
				"outputs":        map[string]any{"controlPlaneEndpoint": map[string]any{"host": "lb.example.org", "port": 6443}},
				"failureDomains": []any{map[string]any{"name": "a"}, map[string]any{"name": "a"}},
			},
			reason: infrav1.InvalidOutputsReason,
			want:   `status.failureDomains[1].name: Duplicate value: "a"`,
		},
		"missing-endpoint": {
			status: map[string]any{"outputs": map[string]any{}},
			reason: infrav1.MissingOutputsReason,
			want:   "status.outputs.controlPlaneEndpoint: Required value",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			cluster, xr := newCluster(t, ns, name, clusterGVK, map[string]string{envtest.ObserveAnnotation: script(tc.status)})
			g.Eventually(func(g Gomega) {
				cc := infraCondition(g, getCluster(g, cluster))
				g.Expect(cc.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(cc.Reason).To(Equal(tc.reason))
				g.Expect(cc.Message).To(ContainSubstring(tc.want))
			}, timeout, interval).Should(Succeed())
			g.Consistently(func(g Gomega) {
				got := getXR(g, xr)
				g.Expect(provisioned(got)).To(BeFalse())
				_, found, _ := unstructured.NestedMap(got.Object, "spec", "controlPlaneEndpoint")
				g.Expect(found).To(BeFalse())
			}, "500ms", interval).Should(Succeed())
		})
	}
}

// Pausing the CAPI Cluster pauses Crossplane on the XR; unpausing resumes it.
// What clusterctl move needs comes with it: while the XR composes, the
// composed kind's CRD carries clusterctl's label and the XR its block-move
// annotation; paused, every composed resource carries the move guard (a
// finalizer and a pause) and then the XR loses block-move; unpaused, the
// guard goes and block-move comes back.
func TestPausedClusterPausesComposition(t *testing.T) {
	stack(t)
	g := NewWithT(t)
	_, cluster, xr := provisionedCluster(t, "pausing")
	g.Eventually(func(g Gomega) {
		g.Expect(ptr.Deref(getCluster(g, cluster).Status.Initialization.InfrastructureProvisioned, false)).To(BeTrue())
		g.Expect(getXR(g, xr).GetAnnotations()).To(HaveKey(infrav1.BlockMoveAnnotation))
		g.Expect(composedCRD(g, composedOf(g, xr)).GetLabels()).To(HaveKey(infrav1.ClusterctlLabel), "clusterctl moves the composed kind")
		g.Expect(composedOf(g, xr).GetFinalizers()).NotTo(ContainElement(infrav1.MoveGuardFinalizer))
	}, timeout, interval).Should(Succeed())

	change(g, cluster, func() { cluster.Spec.Paused = ptr.To(true) })
	g.Eventually(func(g Gomega) {
		got := getXR(g, xr)
		g.Expect(got.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
		// Crossplane stops composing.
		g.Expect(xrCondition(got, "Synced")).To(HaveKeyWithValue("reason", "ReconcilePaused"))
		// Ready for clusterctl move: guarded, then unblocked.
		g.Expect(got.GetAnnotations()).NotTo(HaveKey(infrav1.BlockMoveAnnotation))
		composed := composedOf(g, xr)
		g.Expect(composed.GetFinalizers()).To(ContainElement(infrav1.MoveGuardFinalizer))
		// Paused too: a provider on a crossplane-runtime without the
		// finalizer check would delete the external resource anyway.
		g.Expect(composed.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
		g.Expect(composed.GetAnnotations()).To(HaveKey(infrav1.PausedForMoveAnnotation))
	}, timeout, interval).Should(Succeed())
	// Provisioned is a one-time milestone: a pause does not take it back.
	g.Consistently(func(g Gomega) {
		g.Expect(provisioned(getXR(g, xr))).To(BeTrue())
		g.Expect(ptr.Deref(getCluster(g, cluster).Status.Initialization.InfrastructureProvisioned, false)).To(BeTrue())
	}, "1s", interval).Should(Succeed())

	change(g, cluster, func() { cluster.Spec.Paused = ptr.To(false) })
	g.Eventually(func(g Gomega) {
		got := getXR(g, xr)
		g.Expect(got.GetAnnotations()).NotTo(HaveKey(infrav1.CrossplanePausedAnnotation))
		g.Expect(xrCondition(got, "Synced")).To(HaveKeyWithValue("reason", "ReconcileSuccess"))
		g.Expect(provisioned(got)).To(BeTrue())
		g.Expect(got.GetAnnotations()).To(HaveKey(infrav1.BlockMoveAnnotation))
		composed := composedOf(g, xr)
		g.Expect(composed.GetFinalizers()).NotTo(ContainElement(infrav1.MoveGuardFinalizer), "the provider's own again")
		g.Expect(composed.GetAnnotations()).NotTo(HaveKey(infrav1.CrossplanePausedAnnotation))
		g.Expect(composed.GetAnnotations()).NotTo(HaveKey(infrav1.PausedForMoveAnnotation))
	}, timeout, interval).Should(Succeed())

	// CAPI's pause annotation on the XR itself pauses it too.
	change(g, xr, func() {
		anns := xr.GetAnnotations()
		anns[clusterv1.PausedAnnotation] = ""
		xr.SetAnnotations(anns)
	})
	g.Eventually(func(g Gomega) {
		got := getXR(g, xr)
		g.Expect(got.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
		g.Expect(provisioned(got)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
}

// An XR marked as externally managed is left alone but for its credentials:
// the bridge checks them, lifts the hold the XR was admitted with, and
// writes nothing else.
func TestExternallyManagedInfrastructureIsLeftAlone(t *testing.T) {
	bridge := stack(t)
	g := NewWithT(t)
	ns := namespace(t)
	_, xr := newCluster(t, ns, "external", clusterGVK, map[string]string{
		envtest.ObserveAnnotation:     script(goodStatus),
		clusterv1.ManagedByAnnotation: "someone-else",
	})
	// Crossplane composes it, CAPI adopts it ...
	g.Eventually(func(g Gomega) {
		got := getXR(g, xr)
		g.Expect(xrCondition(got, "Ready")).To(HaveKeyWithValue("status", "True"))
		g.Expect(got.GetLabels()).To(HaveKey(clusterv1.ClusterNameLabel))
	}, timeout, interval).Should(Succeed())
	// ... and the bridge writes nothing but the lifted hold.
	g.Consistently(func(g Gomega) {
		got := getXR(g, xr)
		g.Expect(got.GetFinalizers()).NotTo(ContainElement(infrav1.Finalizer))
		g.Expect(got.GetAnnotations()).NotTo(HaveKey(infrav1.CrossplanePausedAnnotation))
		crossplaneConditionsOnly(g, got)
		g.Expect(provisioned(got)).To(BeFalse())
		g.Expect(bridge.Writes.Count(infrav1.CrossplaneClusterKind, ns, "external")).To(Equal(1))
	}, "1s", interval).Should(Succeed())
}

// Deleting a Cluster deletes the XR's composed resources, and the XR stays
// until every one of them is gone.
func TestDeletionWaitsForComposedResources(t *testing.T) {
	stack(t)
	g := NewWithT(t)
	_, cluster, xr := provisionedCluster(t, "deleting")

	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())

	var composed *unstructured.Unstructured
	g.Eventually(func(g Gomega) {
		composed = composedOf(g, xr)
		g.Expect(composed.GetDeletionTimestamp().IsZero()).To(BeFalse(), "the bridge deletes composed resources")
		c := infraCondition(g, getCluster(g, cluster))
		g.Expect(c.Reason).To(Equal(infrav1.DeletingReason))
		g.Expect(c.Message).To(Equal("Waiting for 1 composed resources to be deleted: Stub/" + composed.GetName()))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		got := getXR(g, xr)
		g.Expect(got.GetFinalizers()).To(ContainElement(infrav1.Finalizer))
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{})).To(Succeed())
	}, "1s", interval).Should(Succeed())

	// The provider finishes deleting the composed resource.
	release(g, composed)

	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(xr), getEmpty(xr))
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the XR is released once nothing composed remains")
		err = env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "CAPI then deletes the Cluster")
	}, timeout, interval).Should(Succeed())
}

func getEmpty(xr *unstructured.Unstructured) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(xr.GroupVersionKind())
	return u
}

// Once provisioned, reconciling again writes nothing: every write wakes
// Crossplane.
func TestNothingIsWrittenWhenNothingChanged(t *testing.T) {
	bridge := stack(t)
	g := NewWithT(t)
	ns, cluster, xr := goodCluster(t, "steady")
	g.Eventually(func(g Gomega) {
		c := getCluster(g, cluster)
		g.Expect(ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false)).To(BeTrue())
		// CAPI copies the endpoint into the Cluster's spec.
		g.Expect(c.Spec.ControlPlaneEndpoint.Host).NotTo(BeEmpty())
		noVerdict(g, c)
	}, timeout, interval).Should(Succeed())
	// Let in-flight events settle: count once two reads a poll apart agree.
	var xrWrites, clusterWrites int
	g.Eventually(func(g Gomega) {
		x, c := bridge.Writes.Count(infrav1.CrossplaneClusterKind, ns, "steady"), bridge.Writes.Count("Cluster", ns, "steady")
		settled := x == xrWrites && c == clusterWrites
		xrWrites, clusterWrites = x, c
		g.Expect(settled).To(BeTrue())
	}, timeout, 500*time.Millisecond).Should(Succeed())
	// From creation to provisioned: on the XR, the hold it was admitted with
	// lifted once its credentials are checked (before CAPI owns it), the
	// finalizer with the endpoint and the provisioned status; on the Cluster
	// nothing: CAPI's
	// InfrastructureReady (Crossplane's Ready) says the XR is composing, and
	// the provisioned milestone that it is done. And one event: Provisioned.
	// A write the API server refused as a conflict changed nothing: the
	// bridge read a cache behind another writer (Crossplane, CAPI), as
	// happens on a busy machine, and reads again.
	conflicts := bridge.Writes.Conflicts(infrav1.CrossplaneClusterKind, ns, "steady")
	t.Logf("writes from creation to provisioned: XR %d (%d refused as conflicts), Cluster %d", xrWrites, conflicts, clusterWrites)
	g.Expect(xrWrites - conflicts).To(BeNumerically("<=", 3))
	g.Expect(clusterWrites).To(BeZero())
	events := &corev1.EventList{}
	g.Expect(env.Client.List(ctx, events, client.InNamespace(ns), client.MatchingFields{"involvedObject.name": "steady"})).To(Succeed())
	var bridgeEvents []string
	for _, e := range events.Items {
		if strings.HasPrefix(e.ReportingController, "capxp-") {
			bridgeEvents = append(bridgeEvents, e.Reason)
		}
	}
	g.Expect(bridgeEvents).To(ConsistOf("Provisioned"), "the bridge's events on the XR")

	// Wake the bridge many times without changing anything it maps.
	for i := range 5 {
		change(g, xr, func() {
			labels := xr.GetLabels()
			labels["touch"] = strconv.Itoa(i)
			xr.SetLabels(labels)
		})
	}
	g.Consistently(func(g Gomega) {
		g.Expect(bridge.Writes.Count(infrav1.CrossplaneClusterKind, ns, "steady")).To(Equal(xrWrites))
		g.Expect(bridge.Writes.Count("Cluster", ns, "steady")).To(Equal(clusterWrites))
	}, "2s", interval).Should(Succeed())
}

// A paused cluster's XR is not torn down, even when deleted: clusterctl move
// pauses a cluster and deletes the source objects, whose composed resources
// now belong to the target. Once unpaused, deletion proceeds.
func TestAPausedClusterIsNotTornDown(t *testing.T) {
	stack(t)
	g := NewWithT(t)
	_, cluster, xr := provisionedCluster(t, "moving")

	change(g, cluster, func() { cluster.Spec.Paused = ptr.To(true) })
	g.Eventually(func(g Gomega) {
		got := getXR(g, xr)
		g.Expect(got.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
		g.Expect(xrCondition(got, "Synced")).To(HaveKeyWithValue("reason", "ReconcilePaused"))
	}, timeout, interval).Should(Succeed())

	// clusterctl marks what it deletes by replacing every annotation with
	// its own: the move policy gives the XR and what it composed theirs
	// back (the pause, the composition resource name, the external name).
	markForMove := client.RawPatch(types.JSONPatchType,
		[]byte(`[{"op": "add", "path": "/metadata/annotations", "value": {"clusterctl.cluster.x-k8s.io/delete-for-move": ""}}]`))
	composed := composedOf(g, xr)
	resourceName := composed.GetAnnotations()["crossplane.io/composition-resource-name"]
	g.Expect(resourceName).NotTo(BeEmpty())
	g.Expect(env.Client.Patch(ctx, composed, markForMove)).To(Succeed())
	g.Expect(composedOf(g, xr).GetAnnotations()).To(And(
		HaveKeyWithValue("crossplane.io/composition-resource-name", resourceName),
		HaveKey("clusterctl.cluster.x-k8s.io/delete-for-move")), "the policy keeps the annotations clusterctl's patch drops")
	g.Expect(env.Client.Patch(ctx, getXR(g, xr), markForMove)).To(Succeed())
	g.Expect(getXR(g, xr).GetAnnotations()).To(And(
		HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"),
		HaveKey("clusterctl.cluster.x-k8s.io/delete-for-move")), "the policy keeps the pause clusterctl's patch drops")
	g.Expect(env.Client.Delete(ctx, getXR(g, xr))).To(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(composedOf(g, xr).GetDeletionTimestamp().IsZero()).To(BeTrue(), "a paused XR's composed resources are left alone")
		got := getXR(g, xr)
		g.Expect(got.GetFinalizers()).To(ContainElement(infrav1.Finalizer))
		g.Expect(xrCondition(got, "Synced")).To(HaveKeyWithValue("reason", "ReconcilePaused"), "Crossplane is paused too")
	}, "1s", interval).Should(Succeed())

	change(g, cluster, func() { cluster.Spec.Paused = ptr.To(false) })
	g.Eventually(func(g Gomega) {
		composed = composedOf(g, xr)
		g.Expect(composed.GetDeletionTimestamp().IsZero()).To(BeFalse(), "unpaused, deletion proceeds")
	}, timeout, interval).Should(Succeed())
	release(g, composed)
	// Crossplane checks its pause before it handles a deletion: the XR is
	// released to it, and goes.
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(xr), getEmpty(xr))
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the XR is gone once unpaused")
	}, timeout, interval).Should(Succeed())
}

// Deleting an XR deletes only what it controls: an object someone added to
// spec.crossplane.resourceRefs is named on the Cluster and in an event, and
// left alone.
func TestOnlyWhatTheXRControlsIsDeleted(t *testing.T) {
	stack(t)
	g := NewWithT(t)
	ns, cluster, xr := provisionedCluster(t, "owner-check")
	notMine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "not-mine"}}
	g.Expect(env.Client.Create(ctx, notMine)).To(Succeed())

	// While Crossplane is paused it does not rewrite the references.
	change(g, cluster, func() { cluster.Spec.Paused = ptr.To(true) })
	g.Eventually(func(g Gomega) {
		g.Expect(xrCondition(getXR(g, xr), "Synced")).To(HaveKeyWithValue("reason", "ReconcilePaused"))
	}, timeout, interval).Should(Succeed())
	change(g, xr, func() {
		refs, _, _ := unstructured.NestedSlice(xr.Object, "spec", "crossplane", "resourceRefs")
		refs = append(refs, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "not-mine"})
		g.Expect(unstructured.SetNestedSlice(xr.Object, refs, "spec", "crossplane", "resourceRefs")).To(Succeed())
	})
	g.Expect(env.Client.Delete(ctx, getXR(g, xr))).To(Succeed())
	change(g, cluster, func() { cluster.Spec.Paused = ptr.To(false) })

	const named = "Not deleting ConfigMap/not-mine: spec.crossplane.resourceRefs names them but this composite resource does not control them"
	g.Eventually(func(g Gomega) {
		c := infraCondition(g, getCluster(g, cluster))
		g.Expect(c.Message).To(Or(Equal(named), HavePrefix("Waiting for 1 composed resources to be deleted")))
		events := &corev1.EventList{}
		g.Expect(env.Client.List(ctx, events, client.InNamespace(ns), client.MatchingFields{"involvedObject.name": "owner-check", "reason": infrav1.NotControlledReason})).To(Succeed())
		g.Expect(events.Items).To(ContainElement(HaveField("Message", named)))
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		for _, s := range stubs(g, ns) {
			if !s.GetDeletionTimestamp().IsZero() {
				release(g, &s)
			}
		}
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(xr), getEmpty(xr)))).To(BeTrue(), "the XR goes once what it controls is gone")
	}, timeout, interval).Should(Succeed())
	got := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(notMine), got)).To(Succeed())
	g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue(), "what the XR does not control is left alone")
}
