package integration

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

var (
	machineGVK   = infrav1.GroupVersion.WithKind(infrav1.CrossplaneMachineKind)
	bootstrapGVK = schema.GroupVersionKind{Group: envtest.TestBootstrapGroup, Version: "v1alpha1", Kind: "TestBootstrapConfig"}
)

// networkStatus is what an AWS-like cluster composition reports.
var networkStatus = map[string]any{
	"outputs": map[string]any{
		"controlPlaneEndpoint": map[string]any{"host": "lb-1.elb.eu-west-1.amazonaws.com", "port": 6443},
		"network": map[string]any{
			"id": "vpc-1",
			"subnets": []any{
				map[string]any{"id": "subnet-pub-a", "failureDomain": "eu-west-1a", "role": "Public"},
				map[string]any{"id": "subnet-priv-a", "failureDomain": "eu-west-1a", "role": "Private"},
			},
			"securityGroups": []any{map[string]any{"id": "sg-node", "role": "Node"}, map[string]any{"id": "sg-cp", "role": "ControlPlane"}},
		},
	},
	"failureDomains": []any{map[string]any{"name": "eu-west-1a", "controlPlane": true}},
}

// workloadCluster starts a CAPI Cluster whose infrastructure is provisioned
// through the bridge, with a real API server as its workload cluster.
func workloadCluster(t *testing.T, w *envtest.Workload, ns, name string) *clusterv1.Cluster {
	t.Helper()
	g := NewWithT(t)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-kubeconfig", Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
		Data:       map[string][]byte{"value": w.Kubeconfig},
	})).To(Succeed())

	providerConfig(t, ns, "team-a", true)
	cluster, xr := newCluster(t, ns, name, clusterGVK, map[string]string{envtest.ObserveAnnotation: script(networkStatus)})
	change(g, xr, func() {
		g.Expect(unstructured.SetNestedMap(xr.Object, map[string]any{"apiGroup": credsGroup, "kind": "ProviderConfig", "name": "team-a"}, "spec", "providerConfigRef")).To(Succeed())
	})
	g.Eventually(func(g Gomega) {
		g.Expect(ptr.Deref(getCluster(g, cluster).Status.Initialization.InfrastructureProvisioned, false)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	return cluster
}

// startWorkload starts a workload cluster's API server for one test. Call it
// before stack: cleanups run last-in first-out, and the API server must stop
// after the controllers connected to it.
func startWorkload(t *testing.T) *envtest.Workload {
	t.Helper()
	w, err := envtest.StartWorkload()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { NewWithT(t).Expect(w.Stop()).To(Succeed()) })
	return w
}

// workerXRs are the machine XRs of the "workers" MachineDeployment's
// Machines. A MachineSet can briefly leave infrastructure objects of machines
// it failed to create (and later deletes) when the machine is slow; those
// belong to no Machine and are not counted.
func workerXRs(g Gomega, ns string) []unstructured.Unstructured {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(machineGVK.GroupVersion().WithKind("CrossplaneMachineList"))
	g.Expect(env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: "workers"})).To(Succeed())
	owned := make([]unstructured.Unstructured, 0, len(list.Items))
	for _, xr := range list.Items {
		for _, o := range xr.GetOwnerReferences() {
			if o.Kind == "Machine" {
				owned = append(owned, xr)
				break
			}
		}
	}
	return owned
}

// controlPlane gives the cluster a control-plane Machine with its Node, so
// that CAPI considers the control plane initialized (for a cluster without a
// control plane provider: a control-plane Machine with a Node). It checks the
// control-plane machine joins the control-plane security group.
func controlPlane(t *testing.T, w *envtest.Workload, ns, cluster string) {
	t.Helper()
	g := NewWithT(t)
	name := cluster + "-cp-0"
	node(g, w, name, "kubernetes://local/"+name)
	xr := &infrav1.CrossplaneMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{envtest.ObserveAnnotation: script(workerStatus)}},
		Spec:       infrav1.CrossplaneMachineSpec{Parameters: infrav1.CrossplaneMachineParameters{Size: "m6i.xlarge"}},
	}
	g.Expect(env.Client.Create(ctx, xr)).To(Succeed())
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster, clusterv1.MachineControlPlaneLabel: ""}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       cluster,
			Version:           "v1.36.0",
			FailureDomain:     "eu-west-1a",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.CrossplaneMachineKind, Name: name},
		},
	}
	g.Expect(env.Client.Create(ctx, m)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := getXR(g, toU(xr))
		sgs, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "network", "securityGroupIDs")
		g.Expect(sgs).To(Equal([]string{"sg-node", "sg-cp"}))
		c := &clusterv1.Cluster{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, c)).To(Succeed())
		g.Expect(conditions.IsTrue(c, clusterv1.ClusterControlPlaneInitializedCondition)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
}

func machineXRs(g Gomega, ns, cluster string) []unstructured.Unstructured {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(machineGVK.GroupVersion().WithKind("CrossplaneMachineList"))
	g.Expect(env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster})).To(Succeed())
	return list.Items
}

// bootstrap plays the bootstrap provider: it writes each config's data secret
// (with a token that must never leak) and reports it created.
func bootstrap(g Gomega, ns, cluster string) []string {
	configs := &unstructured.UnstructuredList{}
	configs.SetGroupVersionKind(bootstrapGVK.GroupVersion().WithKind("TestBootstrapConfigList"))
	g.Expect(env.Client.List(ctx, configs, client.InNamespace(ns))).To(Succeed())
	var tokens []string
	for i := range configs.Items {
		c := &configs.Items[i]
		token := "bootstrap-token-" + c.GetName()
		tokens = append(tokens, token)
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.GetName(), Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
			Type:       clusterv1.ClusterSecretType,
			Data:       map[string][]byte{"value": []byte("#cloud-config\nwrite_files: [{path: /etc/token, content: " + token + "}]\n")},
		}
		g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, secret))).To(Succeed())
		before := c.DeepCopy()
		g.Expect(unstructured.SetNestedField(c.Object, c.GetName(), "status", "dataSecretName")).To(Succeed())
		g.Expect(unstructured.SetNestedField(c.Object, true, "status", "initialization", "dataSecretCreated")).To(Succeed())
		g.Expect(env.Client.Status().Patch(ctx, c, client.MergeFrom(before))).To(Succeed())
	}
	return tokens
}

// node registers the machine's Node in the workload cluster, Ready, as a
// kubelet would once the machine boots.
func node(g Gomega, w *envtest.Workload, name, providerID string) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	if err := w.Client.Create(ctx, n); err != nil {
		g.Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
		return
	}
	now := metav1.Now()
	for t, s := range map[corev1.NodeConditionType]corev1.ConditionStatus{
		corev1.NodeReady: corev1.ConditionTrue, corev1.NodeMemoryPressure: corev1.ConditionFalse,
		corev1.NodeDiskPressure: corev1.ConditionFalse, corev1.NodePIDPressure: corev1.ConditionFalse,
	} {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: t, Status: s, Reason: "Kubelet", LastHeartbeatTime: now, LastTransitionTime: now})
	}
	g.Expect(w.Client.Status().Update(ctx, n)).To(Succeed())
}

func machineDeployment(ns, cluster, name, infraTemplate string, replicas int32) *clusterv1.MachineDeployment {
	return envtest.MachineDeployment(ns, cluster, name, infraTemplate, "eu-west-1a", replicas)
}

func machineTemplate(ns, name string, status map[string]any) *infrav1.CrossplaneMachineTemplate {
	return &infrav1.CrossplaneMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: infrav1.CrossplaneMachineTemplateSpec{Template: infrav1.CrossplaneMachineTemplateResource{
			ObjectMeta: infrav1.TemplateObjectMeta{Annotations: map[string]string{envtest.ObserveAnnotation: script(status)}},
			Spec:       infrav1.CrossplaneMachineSpec{Parameters: infrav1.CrossplaneMachineParameters{Size: "m6i.large"}},
		}},
	}
}

var workerStatus = map[string]any{
	"outputs":       map[string]any{"providerID": "kubernetes://local/{{name}}"},
	"addresses":     []any{map[string]any{"type": "InternalIP", "address": "10.0.1.10"}, map[string]any{"type": "Hostname", "address": "{{name}}"}},
	"failureDomain": "eu-west-1a",
}

// A MachineDeployment of three gets three machine XRs that stay paused
// until their bootstrap data exists, are then composed with the secret's
// reference (never its data), the failure domain and the network injected,
// report provider IDs, and bring their Machines to Running once the Nodes
// register.
func TestAMachineDeploymentIsProvisionedWithGatedMachines(t *testing.T) {
	workload := startWorkload(t)
	stack(t)
	g := NewWithT(t)
	ns := namespace(t)
	cluster := workloadCluster(t, workload, ns, "beta")

	g.Expect(env.Client.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": bootstrapGVK.GroupVersion().String(), "kind": "TestBootstrapConfigTemplate",
		"metadata": map[string]any{"namespace": ns, "name": "workers"},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{}}},
	}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, machineTemplate(ns, "workers-v1", workerStatus))).To(Succeed())
	controlPlane(t, workload, ns, cluster.Name)
	g.Expect(env.Client.Create(ctx, machineDeployment(ns, cluster.Name, "workers", "workers-v1", 3))).To(Succeed())

	// Three machine XRs, gated: paused, nothing composed.
	g.Eventually(func(g Gomega) {
		xrs := workerXRs(g, ns)
		g.Expect(xrs).To(HaveLen(3))
		for i := range xrs {
			xr := &xrs[i]
			g.Expect(xr.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
			// CAPI says what the gate waits for; the bridge adds nothing.
			m := ownerMachine(g, xr)
			g.Expect(conditions.IsFalse(m, clusterv1.MachineBootstrapConfigReadyCondition)).To(BeTrue())
			noVerdict(g, m)
		}
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		for _, xr := range workerXRs(g, ns) {
			g.Expect(xrCondition(&xr, "Synced")).To(HaveKeyWithValue("reason", "ReconcilePaused"), "Crossplane composes nothing while gated")
			g.Expect(xr.GetAnnotations()).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
			_, composed, _ := unstructured.NestedSlice(xr.Object, "spec", "crossplane", "resourceRefs")
			g.Expect(composed).To(BeFalse(), "nothing composed while gated")
			g.Expect(stubs(g, ns, client.MatchingLabels{compositeLabel: xr.GetName()})).To(BeEmpty(), "nothing composed while gated")
		}
	}, "1s", interval).Should(Succeed())

	// The Nodes will register as the machines boot.
	for _, xr := range workerXRs(g, ns) {
		node(g, workload, xr.GetName(), "kubernetes://local/"+xr.GetName())
	}
	tokens := bootstrap(g, ns, cluster.Name)
	g.Expect(tokens).To(HaveLen(3))

	g.Eventually(func(g Gomega) {
		xrs := workerXRs(g, ns)
		g.Expect(xrs).To(HaveLen(3))
		for i := range xrs {
			xr := &xrs[i]
			g.Expect(xr.GetAnnotations()).NotTo(HaveKey(infrav1.CrossplanePausedAnnotation))
			g.Expect(provisioned(xr)).To(BeTrue())
			spec, _, _ := unstructured.NestedMap(xr.Object, "spec")
			g.Expect(spec).To(HaveKeyWithValue("providerID", "kubernetes://local/"+xr.GetName()))
			g.Expect(spec).To(HaveKeyWithValue("failureDomain", "eu-west-1a"))
			g.Expect(spec["bootstrap"]).To(HaveKeyWithValue("dataSecretRef", HaveKeyWithValue("key", "value")))
			g.Expect(spec["network"]).To(Equal(map[string]any{"networkID": "vpc-1", "subnetID": "subnet-priv-a", "securityGroupIDs": []any{"sg-node"}}))
			g.Expect(spec["providerConfigRef"]).To(HaveKeyWithValue("name", "team-a"))
			// Where each of them came from.
			from := xr.GetAnnotations()[infrav1.InjectedFromAnnotation]
			g.Expect(strings.Split(from, "\n")).To(ConsistOf(
				MatchRegexp(`^spec\.bootstrap: Machine \S+'s bootstrap data secret \S+$`),
				"spec.failureDomain: Machine.spec.failureDomain",
				"spec.network.networkID: "+clusterGVK.Kind+" beta's status.outputs.network",
				"spec.network.securityGroupIDs: "+clusterGVK.Kind+" beta's status.outputs.network",
				"spec.network.subnetID: "+clusterGVK.Kind+" beta's status.outputs.network",
				"spec.providerConfigRef: "+clusterGVK.Kind+" beta's spec.providerConfigRef",
			), from)
		}
		machines := &clusterv1.MachineList{}
		g.Expect(env.Client.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: "workers"})).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(3))
		for _, m := range machines.Items {
			g.Expect(m.Status.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)))
			g.Expect(m.Status.NodeRef.Name).To(Equal(m.Spec.InfrastructureRef.Name))
			g.Expect(m.Status.Addresses).To(ContainElement(HaveField("Address", "10.0.1.10")))
			g.Expect(conditions.IsTrue(&m, clusterv1.MachineInfrastructureReadyCondition)).To(BeTrue())
			noVerdict(g, &m)
		}
	}, timeout, interval).Should(Succeed())

	// Bootstrap data is a secret: it appears in no XR and no composed object.
	var everything []any
	for _, xr := range machineXRs(g, ns, cluster.Name) {
		everything = append(everything, xr.Object)
	}
	clusterXR := &unstructured.Unstructured{}
	clusterXR.SetGroupVersionKind(clusterGVK)
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.Name}, clusterXR)).To(Succeed())
	everything = append(everything, clusterXR.Object)
	composed := stubs(g, ns)
	g.Expect(composed).NotTo(BeEmpty())
	for _, c := range composed {
		everything = append(everything, c.Object)
	}
	raw, err := json.Marshal(everything)
	g.Expect(err).NotTo(HaveOccurred())
	for _, token := range tokens {
		g.Expect(strings.Contains(string(raw), token)).To(BeFalse(), "bootstrap data leaked: %s", token)
	}
	g.Expect(strings.Contains(string(raw), "cloud-config")).To(BeFalse())

	// Scale down: one machine goes, and its XR waits for what it composed.
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers"}}
	change(g, md, func() { md.Spec.Replicas = ptr.To[int32](2) })
	var leaving *unstructured.Unstructured
	g.Eventually(func(g Gomega) {
		for _, xr := range workerXRs(g, ns) {
			if !xr.GetDeletionTimestamp().IsZero() {
				leaving = xr.DeepCopy()
			}
		}
		g.Expect(leaving).NotTo(BeNil())
		g.Expect(infraCondition(g, ownerMachine(g, leaving)).Message).To(ContainSubstring("Waiting for 1 composed resources to be deleted"))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) { getXR(g, leaving) }, "500ms", interval).Should(Succeed())
	release(g, composedOf(g, leaving))
	g.Eventually(func(g Gomega) {
		g.Expect(workerXRs(g, ns)).To(HaveLen(2))
		machines := &clusterv1.MachineList{}
		g.Expect(env.Client.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: "workers"})).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(2))
	}, timeout, interval).Should(Succeed())

	// A new template rolls the machines: CAPI replaces them, the bridge
	// gates the new ones until their bootstrap data exists, and the old XRs
	// go once what they composed is gone.
	g.Expect(env.Client.Create(ctx, machineTemplate(ns, "workers-v2", workerStatus))).To(Succeed())
	change(g, md, func() { md.Spec.Template.Spec.InfrastructureRef.Name = "workers-v2" })
	g.Eventually(func(g Gomega) {
		operate(g, ns, cluster.Name, workload)
		xrs := workerXRs(g, ns)
		g.Expect(xrs).To(HaveLen(2))
		for i := range xrs {
			g.Expect(xrs[i].GetAnnotations()).To(HaveKeyWithValue(clusterv1.TemplateClonedFromNameAnnotation, "workers-v2"))
			g.Expect(provisioned(&xrs[i])).To(BeTrue())
		}
	}, 2*timeout, interval).Should(Succeed())

	// Deleting the cluster's XR directly does not take the network from
	// under its machines: it waits for the Machines first.
	clusterXR = &unstructured.Unstructured{}
	clusterXR.SetGroupVersionKind(clusterGVK)
	clusterXR.SetNamespace(ns)
	clusterXR.SetName(cluster.Name)
	g.Expect(env.Client.Delete(ctx, clusterXR)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(infraCondition(g, getCluster(g, capiCluster(ns, cluster.Name))).Reason).To(Equal(infrav1.WaitingForMachinesReason))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(composedOf(g, clusterXR).GetDeletionTimestamp().IsZero()).To(BeTrue(), "the cluster's network stays while machines use it")
	}, "1s", interval).Should(Succeed())

	// Deleting the Cluster tears everything down, machines first, and
	// leaves nothing behind.
	g.Expect(env.Client.Delete(ctx, cluster)).To(Succeed())
	g.Eventually(func(g Gomega) {
		operate(g, ns, cluster.Name, workload)
		g.Expect(machineXRs(g, ns, cluster.Name)).To(BeEmpty())
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(clusterXR), getEmpty(clusterXR)))).To(BeTrue())
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{}))).To(BeTrue())
		g.Expect(stubs(g, ns)).To(BeEmpty(), "composed resource left behind")
	}, 2*timeout, interval).Should(Succeed())
}

// operate plays everything outside CAPXP and CAPI for one round: the
// bootstrap provider writes data secrets, kubelets register Ready Nodes, and
// providers finish deleting composed resources. Nodes register ahead of
// their machines' provider IDs: CAPI only watches a workload cluster's Nodes
// once its control plane is initialized, which a cluster without a control
// plane never is, so a Machine finds its Node when its provider ID arrives.
func operate(g Gomega, ns, cluster string, w *envtest.Workload) {
	bootstrap(g, ns, cluster)
	for _, xr := range machineXRs(g, ns, cluster) {
		node(g, w, xr.GetName(), "kubernetes://local/"+xr.GetName())
	}
	for _, s := range stubs(g, ns) {
		if !s.GetDeletionTimestamp().IsZero() && controllerutil.ContainsFinalizer(&s, envtest.HoldFinalizer) {
			release(g, &s)
		}
	}
}

// A composition reporting a malformed provider ID or address gets a
// condition naming the field and the value, on the XR and on its Machine, and
// the machine is never reported provisioned.
func TestBadMachineOutputsGiveAClearCondition(t *testing.T) {
	workload := startWorkload(t)
	stack(t)
	ns := namespace(t)
	cluster := workloadCluster(t, workload, ns, "gamma")
	cases := map[string]struct {
		status map[string]any
		want   string
	}{
		"provider-id-without-scheme": {
			status: map[string]any{"outputs": map[string]any{"providerID": "i-0123"}},
			want:   `status.outputs.providerID: Invalid value: "i-0123": must have the form <scheme>://<id>`,
		},
		"address-of-unknown-type": {
			status: map[string]any{"outputs": map[string]any{"providerID": "kubernetes://local/x"}, "addresses": []any{map[string]any{"type": "PrivateIP", "address": "10.0.0.1"}}},
			want:   `status.addresses[0].type: Unsupported value: "PrivateIP"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			xr := &infrav1.CrossplaneMachine{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{envtest.ObserveAnnotation: script(tc.status)}},
				Spec:       infrav1.CrossplaneMachineSpec{Parameters: infrav1.CrossplaneMachineParameters{Size: "small"}},
			}
			g.Expect(env.Client.Create(ctx, xr)).To(Succeed())
			m := bootstrappedMachine(g, ns, name, cluster.Name)
			invalidOutputs(g, m, tc.want)
			g.Consistently(func(g Gomega) {
				got := getXR(g, toU(xr))
				g.Expect(provisioned(got)).To(BeFalse())
				_, found, _ := unstructured.NestedString(got.Object, "spec", "providerID")
				g.Expect(found).To(BeFalse())
			}, "500ms", interval).Should(Succeed())
		})
	}
}

// invalidOutputs waits for the bridge's InvalidOutputs verdict on a Machine,
// its message holding want.
func invalidOutputs(g Gomega, m *clusterv1.Machine, want string) {
	g.Eventually(func(g Gomega) {
		mc := infraCondition(g, getMachine(g, m))
		g.Expect(mc.Reason).To(Equal(infrav1.InvalidOutputsReason))
		g.Expect(mc.Message).To(ContainSubstring(want))
	}, timeout, interval).Should(Succeed())
}

// bootstrappedMachine creates a Machine of cluster, with its bootstrap data
// secret set, for the machine XR of the same name.
func bootstrappedMachine(g Gomega, ns, name, cluster string) *clusterv1.Machine {
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Spec: clusterv1.MachineSpec{
			ClusterName: cluster,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.CrossplaneMachineKind, Name: name,
			},
		},
	}
	g.Expect(env.Client.Create(ctx, m)).To(Succeed())
	return m
}

// ownerMachine is the Machine that owns a machine XR.
func ownerMachine(g Gomega, xr *unstructured.Unstructured) *clusterv1.Machine {
	for _, ref := range xr.GetOwnerReferences() {
		if ref.Kind == "Machine" {
			return getMachine(g, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: xr.GetNamespace(), Name: ref.Name}})
		}
	}
	g.Expect(xr.GetOwnerReferences()).To(ContainElement(HaveField("Kind", "Machine")), "no owner Machine")
	return nil
}

func getMachine(g Gomega, m *clusterv1.Machine) *clusterv1.Machine {
	got := &clusterv1.Machine{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
	return got
}

func toU(xr *infrav1.CrossplaneMachine) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(machineGVK)
	u.SetNamespace(xr.Namespace)
	u.SetName(xr.Name)
	return u
}

// Every XR is held from the moment it exists: the API server adds
// crossplane.io/paused at admission, so no watcher (Crossplane included) ever
// sees it unpaused before the bridge has checked its credentials, whoever
// creates it and whatever its template says.
func TestNewXRsAreHeldAtAdmission(t *testing.T) {
	stack(t)
	g := NewWithT(t)
	ns := namespace(t)
	g.Eventually(func(g Gomega) {
		xr := &infrav1.CrossplaneMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "probe-"},
			Spec:       infrav1.CrossplaneMachineSpec{Parameters: infrav1.CrossplaneMachineParameters{Size: "small"}},
		}
		g.Expect(env.Client.Create(ctx, xr)).To(Succeed())
		// The object the API server stored and returned, before any controller ran.
		g.Expect(xr.Annotations).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
	}, timeout, interval).Should(Succeed())

	// Cluster XRs too; the bridge lifts the hold once it has checked the
	// credentials (here the composition's default).
	c := &infrav1.CrossplaneCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"}}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Expect(c.Annotations).To(HaveKeyWithValue(infrav1.CrossplanePausedAnnotation, "true"))
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		g.Expect(c.Annotations).NotTo(HaveKey(infrav1.CrossplanePausedAnnotation))
	}, timeout, interval).Should(Succeed())
}
