package plane

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/xrd"
	"github.com/capxp/cluster-api-provider-crossplane/packages"
)

// Example is the cluster in examples/local (embedded in package capxp).
const (
	ExampleNamespace = "capxp-demo"
	ExampleCluster   = "demo"
	ExampleMachines  = 3
)

// An Example is one of the example clusters of examples/ that the plane
// applies.
type Example struct {
	// Name is how capxp-dev --example names it.
	Name string
	// File is its manifest in package capxp's Manifests.
	File string
	// Setup, when set, is a manifest applied before File: a platform team's
	// XRDs, Compositions, CRDs and RBAC. Each XRD that declares a contract
	// also gets what `capxp xrd adopt` prints: its template CRD and RBAC.
	Setup string
	// Cluster is its Cluster's name, in namespace capxp-<Cluster>.
	Cluster string
	// Classes are ClusterClass files of the release (packages/clusterctl),
	// applied in the example's namespace before File, as `clusterctl
	// generate cluster` includes them.
	Classes []string
	// Machines is how many Machines it has once provisioned.
	Machines int
	// Description says what it shows.
	Description string
	// Available says whether CAPI reports the cluster Available once it is
	// provisioned: a cluster needs a control-plane provider for that.
	Available bool
}

// Examples are the example clusters, the first the default.
var Examples = []Example{
	{Name: "local", File: capxp.LocalExample, Cluster: ExampleCluster, Machines: ExampleMachines, Available: true,
		Description: "a KubeadmControlPlane of 1 and a MachineDeployment of 2 on the local backend, each a Node provider-kubernetes registers and kwok runs"},
	{Name: "byo", File: capxp.BYOExample, Cluster: "iron", Machines: 3,
		Description: "3 hosts that already exist on the byo backend, which composes nothing and deletes nothing"},
	{Name: "platform", File: capxp.PlatformExample, Setup: capxp.PlatformXRD, Cluster: "vms", Machines: 3,
		Description: "a MachineDeployment of 3 of a platform team's own machine kind: its XRD and Composition, and the template CRD and RBAC capxp xrd adopt prints"},
	{Name: "external", File: capxp.ExternalExample, Setup: capxp.ExternalInfrastructure, Cluster: "legacy", Machines: 2,
		Description: "a MachineDeployment of 2 CAPXP machines under an InfraCluster another system manages, their network and credentials from their template"},
	{Name: "topology", File: capxp.TopologyExample, Classes: []string{"clusterclass-crossplane-local.yaml", "clusterclass-crossplane-byo.yaml"}, Cluster: "classy", Machines: 3, Available: true,
		Description: "a Cluster from the ClusterClass crossplane-local: a KubeadmControlPlane of 1 and a MachineDeployment of 2, all CrossplaneMachines on the local backend"},
	{Name: "managed", File: capxp.ManagedExample, Cluster: "managed", Machines: 2, Available: true,
		Description: "a managed control plane, a CrossplaneControlPlane whose kubeconfig the bridge writes, a MachineDeployment of 2 and a MachinePool of 2 on the local backend"},
	{Name: "managed-topology", File: capxp.ManagedTopologyExample, Classes: []string{"clusterclass-crossplane-managed.yaml"}, Cluster: "hosted", Machines: 2, Available: true,
		Description: "a Cluster from the ClusterClass crossplane-managed: a managed control plane, a MachineDeployment of 2 and a MachinePool of 2 bootstrapped by kubeadm, on the local backend"},
}

// ExampleNamed finds an example by name, or says which there are.
func ExampleNamed(name string) (Example, error) {
	names := make([]string, 0, len(Examples))
	for _, e := range Examples {
		if e.Name == name {
			return e, nil
		}
		names = append(names, e.Name)
	}
	return Example{}, errors.Errorf("no example %q: the examples are %s", name, strings.Join(names, ", "))
}

// Namespace is where the example's objects live.
func (e Example) Namespace() string { return ExampleNamespaceOf(e.Cluster) }

// ApplyExample creates the Secrets holding the workload cluster's kubeconfig
// (for provider-kubernetes and for CAPI) and applies examples/local.
func (p *Plane) ApplyExample(ctx context.Context) error {
	return p.ApplyExampleAs(ctx, ExampleCluster)
}

// workloadEtcd is the endpoint of the workload cluster's etcd.
func (p *Plane) workloadEtcd() string {
	return p.Workload.Envtest.ControlPlane.Etcd.URL.String()
}

// WorkloadEtcd is the endpoint of the workload cluster's etcd, which a
// cluster of kubeadm's control plane uses as its external etcd: the
// simulated hosts run none of their own.
func (p *Plane) WorkloadEtcd() string { return p.workloadEtcd() }

// KubeadmClusterSecrets are the Secrets a cluster of kubeadm's control plane
// on the local backend needs in its namespace before it is applied: its
// <cluster>-kubeconfig, the workload cluster's (of a type kubeadm's control
// plane provider leaves alone), and its external etcd's CA and client
// certificate (see WorkloadEtcd).
func (p *Plane) KubeadmClusterSecrets(ns, cluster string) ([]*corev1.Secret, error) {
	etcd, err := etcdClientSecrets(ns, cluster)
	if err != nil {
		return nil, err
	}
	kubeconfig := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster + "-kubeconfig", Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"value": p.Workload.Kubeconfig},
	}
	return append([]*corev1.Secret{kubeconfig}, etcd...), nil
}

// etcdClientSecrets are what a user gives kubeadm's control plane provider
// for a cluster of external etcd (<cluster>-etcd, its CA, and
// <cluster>-apiserver-etcd-client, the API server's client certificate),
// which it writes to each control-plane host. The workload cluster's etcd
// asks for no certificate: these are signed by a CA of their own.
func etcdClientSecrets(ns, cluster string) ([]*corev1.Secret, error) {
	ca, err := newAuthority(cluster + "-etcd")
	if err != nil {
		return nil, err
	}
	cert, key, err := ca.issue("kube-apiserver-etcd-client", x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	secret := func(name string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster + "-" + name, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
			Type:       clusterv1.ClusterSecretType,
			Data:       data,
		}
	}
	return []*corev1.Secret{
		secret("etcd", map[string][]byte{tlsCert: ca.certPEM}),
		secret("apiserver-etcd-client", map[string][]byte{tlsCert: cert, tlsKey: key}),
	}, nil
}

// WorkloadEtcdVariable is the variable of an example that stands for the
// workload cluster's etcd endpoint.
const WorkloadEtcdVariable = "WORKLOAD_ETCD_ENDPOINT"

// ExampleNamespaceOf is the namespace of the example applied as name.
func ExampleNamespaceOf(name string) string { return "capxp-" + name }

// ApplyExampleAs applies examples/local as a cluster called name, in
// namespace capxp-<name>: every "demo" of the example becomes name, so its
// machines' Nodes do not clash with another copy's in the workload cluster.
// Tests use it for fleets.
func (p *Plane) ApplyExampleAs(ctx context.Context, name string) error {
	return p.apply(ctx, Examples[0], name)
}

// ApplyNamedExample applies one of Examples as it is.
func (p *Plane) ApplyNamedExample(ctx context.Context, e Example) error {
	return p.apply(ctx, e, e.Cluster)
}

func (p *Plane) apply(ctx context.Context, e Example, name string) error {
	if e.Setup != "" {
		if err := p.setup(ctx, e.Setup); err != nil {
			return err
		}
	}
	raw, err := fs.ReadFile(capxp.Manifests, e.File)
	if err != nil {
		return errors.Wrapf(err, "cannot read %s", e.File)
	}
	if name != e.Cluster {
		raw = bytes.ReplaceAll(raw, []byte(e.Cluster), []byte(name))
	}
	// A control plane's external etcd is the workload cluster's own.
	raw = bytes.ReplaceAll(raw, []byte("${"+WorkloadEtcdVariable+"}"), []byte(p.workloadEtcd()))
	objs, err := decodeManifests(e.File, raw)
	if err != nil {
		return err
	}
	ns := ExampleNamespaceOf(name)
	// The namespace first, then the Secrets the example's objects read.
	if err := p.create(ctx, objs[0]); err != nil {
		return err
	}
	secrets := []*corev1.Secret{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workload-kubeconfig"},
			Data:       map[string][]byte{"kubeconfig": p.Workload.Kubeconfig},
		},
		{
			// CAPI reads a workload cluster's kubeconfig from
			// <cluster>-kubeconfig, which a control-plane provider writes.
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-kubeconfig",
				Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type: clusterv1.ClusterSecretType,
			Data: map[string][]byte{"value": p.Workload.Kubeconfig},
		},
	}
	classes, err := readClasses(e.Classes, ns)
	if err != nil {
		return err
	}
	if usesCrossplaneControlPlane(objs) || usesCrossplaneControlPlane(classes) {
		// The bridge writes it, from the Secret the control plane's
		// composition names.
		secrets = secrets[:1]
	} else if len(e.Classes) > 0 || usesKubeadmControlPlane(objs) {
		// kubeadm's control plane provider writes it from the certificates
		// it generates, for an API server kubeadm would start with them. The
		// workload API server already runs, with certificates of its own:
		// its kubeconfig is the user's, which the provider leaves alone (it
		// adopts and rotates only Secrets of CAPI's type).
		secrets[1].Type = corev1.SecretTypeOpaque
	}
	if usesCrossplaneControlPlane(classes) && usesKubeadmBootstrap(classes) {
		ca, err := clusterCASecret(ns, name)
		if err != nil {
			return err
		}
		secrets = append(secrets, ca)
	}
	if bytes.Contains(raw, []byte(p.workloadEtcd())) {
		etcd, err := etcdClientSecrets(ns, name)
		if err != nil {
			return err
		}
		secrets = append(secrets, etcd...)
	}
	for _, s := range secrets {
		if err := p.client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return errors.Wrapf(err, "cannot create Secret %s", s.Name)
		}
	}
	for _, o := range classes {
		if err := p.create(ctx, o); err != nil {
			return err
		}
	}
	for _, o := range objs[1:] {
		if err := p.standIn(ctx, o); err != nil {
			return err
		}
	}
	for _, o := range objs[1:] {
		if err := p.create(ctx, o); err != nil {
			return err
		}
		if err := p.reportExternal(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// clusterCASecret is the cluster CA (<cluster>-ca, certificate and key)
// kubeadm's bootstrap provider reads to write a worker's join data, which a
// managed service that lets kubeadm join its workers provides (CAPI's custom
// certificates), and which no managed control plane writes for it. The
// workload API server's own CA key is envtest's and not on disk; the
// simulated hosts run no kubeadm and check nothing against it, so this
// stand-in's CA is one of its own, as the external etcd's is.
func clusterCASecret(ns, cluster string) (*corev1.Secret, error) {
	ca, err := newAuthority(cluster + "-ca")
	if err != nil {
		return nil, err
	}
	key, err := ca.keyPEM()
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster + "-ca", Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Type:       clusterv1.ClusterSecretType,
		Data:       map[string][]byte{tlsCert: ca.certPEM, tlsKey: key},
	}, nil
}

// readClasses reads ClusterClass files of the release with clusterctl's
// variable processing, in namespace ns.
func readClasses(files []string, ns string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, f := range files {
		raw, err := packages.Clusterctl.ReadFile(path.Join(packages.ClusterctlDir, f))
		if err != nil {
			return nil, errors.Wrapf(err, "cannot read the release's %s", f)
		}
		raw, err = yamlprocessor.NewSimpleProcessor().Process(raw, func(name string) (string, error) {
			if name == "NAMESPACE" {
				return ns, nil
			}
			return "", errors.Errorf("%s: no value for variable %s", f, name)
		})
		if err != nil {
			return nil, errors.Wrapf(err, "cannot process %s", f)
		}
		objs, err := decodeManifests(f, raw)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// usesKubeadmControlPlane: a ClusterClass or a KubeadmControlPlane among
// the objects.
func usesKubeadmControlPlane(objs []*unstructured.Unstructured) bool {
	for _, o := range objs {
		if o.GetKind() == "ClusterClass" || o.GetKind() == "KubeadmControlPlane" {
			return true
		}
	}
	return false
}

// usesKubeadmBootstrap: a KubeadmConfigTemplate among the objects.
func usesKubeadmBootstrap(objs []*unstructured.Unstructured) bool {
	for _, o := range objs {
		if o.GetKind() == "KubeadmConfigTemplate" {
			return true
		}
	}
	return false
}

// usesCrossplaneControlPlane: a CrossplaneControlPlane, or its template,
// among the objects.
func usesCrossplaneControlPlane(objs []*unstructured.Unstructured) bool {
	for _, o := range objs {
		if o.GetKind() == infrav1.CrossplaneControlPlaneKind || o.GetKind() == infrav1.CrossplaneControlPlaneTemplateKind {
			return true
		}
	}
	return false
}

// reportExternal plays the system that manages an object CAPI's
// `cluster.x-k8s.io/managed-by` annotation hands to it: it reports the
// object provisioned, as CAPI's contract asks of that system.
func (p *Plane) reportExternal(ctx context.Context, o *unstructured.Unstructured) error {
	if _, ok := o.GetAnnotations()[clusterv1.ManagedByAnnotation]; !ok {
		return nil
	}
	patch := []byte(`{"status":{"initialization":{"provisioned":true},"ready":true}}`)
	if err := p.client.Status().Patch(ctx, o, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return errors.Wrapf(err, "cannot report %s %s provisioned", o.GetKind(), o.GetName())
	}
	return nil
}

// setup applies a platform team's XRDs and Compositions, and for each XRD
// that declares a contract what `capxp xrd adopt` prints (its template CRD,
// the ClusterRoles for the bridge and CAPI), then waits until Crossplane has
// established the XR kind's CRD and the template CRD is established.
func (p *Plane) setup(ctx context.Context, file string) error {
	objs, err := readManifests(file)
	if err != nil {
		return err
	}
	crossplane, err := capxp.CrossplaneSchema()
	if err != nil {
		return err
	}
	// The adoption first, so that the bridge may watch the kind as soon as
	// it sees the XRD.
	var established []string
	for _, o := range objs {
		if o.GetKind() != "CompositeResourceDefinition" || o.GetLabels()[infrav1.ContractLabel] == "" {
			continue
		}
		x := &xpextv2.CompositeResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, x); err != nil {
			return errors.Wrapf(err, "cannot read XRD %s", o.GetName())
		}
		a, err := xrd.Adopt(x, crossplane)
		if err != nil {
			return err
		}
		for _, ro := range a.Objects() {
			c := ro.(client.Object)
			if err := p.client.Create(ctx, c); err != nil && !apierrors.IsAlreadyExists(err) {
				return errors.Wrapf(err, "cannot create %s %s", ro.GetObjectKind().GroupVersionKind().Kind, c.GetName())
			}
		}
		established = append(established, x.Name, a.TemplateCRD.Name)
	}
	for _, o := range objs {
		if err := p.create(ctx, o); err != nil {
			return err
		}
		if o.GetKind() == "CustomResourceDefinition" {
			established = append(established, o.GetName())
		}
	}
	for _, name := range established {
		if err := p.waitEstablished(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// waitEstablished waits up to a minute for a CRD to be established.
func (p *Plane) waitEstablished(ctx context.Context, name string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		crd := &extv1.CustomResourceDefinition{}
		err := p.client.Get(ctx, client.ObjectKey{Name: name}, crd)
		if err == nil {
			for _, c := range crd.Status.Conditions {
				if c.Type == extv1.Established && c.Status == extv1.ConditionTrue {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return errors.Errorf("CRD %s is not established after a minute (%v)", name, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// standIn plays, for an example's object, what exists outside the plane: a
// cluster's API server named in the example (bring your own, or managed by
// another system) is the local workload API server, and
// each existing host has joined the workload cluster as a Node carrying its
// providerID, named by its Hostname address (else its machine's name) and
// labelled with its failure domain.
func (p *Plane) standIn(ctx context.Context, o *unstructured.Unstructured) error {
	if _, ok, _ := unstructured.NestedMap(o.Object, "spec", "controlPlaneEndpoint"); ok {
		u, err := url.Parse(p.Workload.Config.Host)
		if err != nil {
			return errors.Wrap(err, "cannot parse the workload API server's address")
		}
		port, err := strconv.ParseInt(u.Port(), 10, 32)
		if err != nil {
			return errors.Wrapf(err, "cannot parse the workload API server's port in %s", u)
		}
		return unstructured.SetNestedMap(o.Object, map[string]any{"host": u.Hostname(), "port": port}, "spec", "controlPlaneEndpoint")
	}
	raw, ok, _ := unstructured.NestedMap(o.Object, "spec", "parameters", "host")
	if o.GetKind() != "CrossplaneMachine" || !ok {
		return nil
	}
	host := &infrav1.ExistingHost{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, host); err != nil {
		return errors.Wrapf(err, "cannot read spec.parameters.host of CrossplaneMachine %s", o.GetName())
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: o.GetName()}, Spec: corev1.NodeSpec{ProviderID: host.ProviderID}}
	for _, a := range host.Addresses {
		if a.Type == string(clusterv1.MachineHostName) {
			node.Name = a.Address
		}
	}
	if host.FailureDomain != "" {
		node.Labels = map[string]string{corev1.LabelTopologyZone: host.FailureDomain}
	}
	if err := p.Workload.Client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return errors.Wrapf(err, "cannot register the Node of host %s in the workload cluster", host.ProviderID)
	}
	return nil
}

// A kind established moments ago may not be in the client's discovery yet,
// nor in the API server's admission policies' type converters (the machine
// gate's MutatingAdmissionPolicy answers 503 until it is): it retries for a
// while, as kubectl users do.
func (p *Plane) create(ctx context.Context, o *unstructured.Unstructured) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := p.client.Create(ctx, o)
		switch {
		case err == nil, apierrors.IsAlreadyExists(err):
			return nil
		case (meta.IsNoMatchError(err) || apierrors.IsServiceUnavailable(err)) && time.Now().Before(deadline):
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		default:
			return errors.Wrapf(err, "cannot create %s %s", o.GetKind(), o.GetName())
		}
	}
}

// readManifests decodes every object of an embedded manifest file.
func readManifests(path string) ([]*unstructured.Unstructured, error) {
	raw, err := fs.ReadFile(capxp.Manifests, path)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot read %s", path)
	}
	return decodeManifests(path, raw)
}

// decodeManifests decodes every object of a manifest file's content.
func decodeManifests(path string, raw []byte) ([]*unstructured.Unstructured, error) {
	d := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, errors.Wrapf(err, "cannot decode %s", path)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// Status is what a person watching the example wants to know.
type Status struct {
	// Lines describe the cluster and each machine, with CAPI's phases and
	// conditions and Crossplane's words about their XRs.
	Lines []string
	// Provisioned: the cluster's infrastructure is provisioned, every
	// machine has a providerID and a Node, and every MachinePool runs the
	// machines it asks for, each with a Node.
	Provisioned bool
	// Available: CAPI reports the Cluster Available, every Machine Ready
	// and Available, and every MachinePool's machines ready and available.
	Available bool
}

// ExampleStatus reads the example cluster's state.
func (p *Plane) ExampleStatus(ctx context.Context, machines int) (Status, error) {
	return p.ExampleStatusOf(ctx, ExampleCluster, machines)
}

// ExampleStatusOf reads the state of the example applied as name.
func (p *Plane) ExampleStatusOf(ctx context.Context, name string, machines int) (Status, error) {
	ns := ExampleNamespaceOf(name)
	c := p.client
	var st Status
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster); err != nil {
		return st, err
	}
	infra := ptrValue(cluster.Status.Initialization.InfrastructureProvisioned)
	xr := &infrav1.CrossplaneCluster{}
	_ = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, xr)
	st.Lines = append(st.Lines, fmt.Sprintf("Cluster %s: phase %s, infrastructure provisioned %t, endpoint %s; %s; %s; XR %s",
		cluster.Name, orDash(cluster.Status.Phase), infra, endpoint(cluster), condition(cluster.Status.Conditions, clusterv1.AvailableCondition),
		infraWords(cluster.Status.Conditions, clusterv1.ClusterInfrastructureReadyCondition), xrWords(xr.Status.Conditions)))
	available := meta.IsStatusConditionTrue(cluster.Status.Conditions, clusterv1.AvailableCondition)

	ms := &clusterv1.MachineList{}
	if err := c.List(ctx, ms, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return st, err
	}
	sort.Slice(ms.Items, func(i, j int) bool { return ms.Items[i].Name < ms.Items[j].Name })
	ready := 0
	xrs := p.infraXRs(ns)
	for i := range ms.Items {
		m := &ms.Items[i]
		mxr := xrs.conditions(ctx, m.Spec.InfrastructureRef)
		node := "-"
		if m.Status.NodeRef.IsDefined() {
			node = m.Status.NodeRef.Name
		}
		if m.Spec.ProviderID != "" && node != "-" {
			ready++
		}
		available = available && meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineReadyCondition) &&
			meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.MachineAvailableCondition)
		st.Lines = append(st.Lines, fmt.Sprintf("  Machine %s: phase %s, providerID %s, node %s; %s; %s; XR %s",
			m.Name, orDash(m.Status.Phase), orDash(m.Spec.ProviderID), node, condition(m.Status.Conditions, clusterv1.MachineReadyCondition),
			infraWords(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition), xrWords(mxr)))
	}
	pools, poolsReady, poolsAvailable, err := p.poolStatus(ctx, xrs, name)
	if err != nil {
		return st, err
	}
	st.Lines = append(st.Lines, pools...)
	st.Provisioned = infra && len(ms.Items) == machines && ready == machines && poolsReady
	st.Available = st.Provisioned && available && poolsAvailable
	return st, nil
}

// poolStatus describes the cluster's MachinePools: whether each runs the
// machines it asks for, with a Node each, and whether CAPI counts them all
// ready and available (CAPI's Cluster Available does not wait for pools).
func (p *Plane) poolStatus(ctx context.Context, xrs *infraXRs, cluster string) (lines []string, provisioned, available bool, err error) {
	mps := &clusterv1.MachinePoolList{}
	if err := p.client.List(ctx, mps, client.InNamespace(xrs.ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		return nil, false, false, err
	}
	provisioned, available = true, true
	for i := range mps.Items {
		mp := &mps.Items[i]
		want := ptr.Deref(mp.Spec.Replicas, 1)
		ready, avail := ptr.Deref(mp.Status.ReadyReplicas, 0), ptr.Deref(mp.Status.AvailableReplicas, 0)
		xr := xrs.conditions(ctx, mp.Spec.Template.Spec.InfrastructureRef)
		lines = append(lines, fmt.Sprintf("  MachinePool %s: phase %s, %d asked, %d provider IDs, %d with a Node, %d ready, %d available; XR %s",
			mp.Name, orDash(mp.Status.Phase), want, len(mp.Spec.ProviderIDList), len(mp.Status.NodeRefs), ready, avail, xrWords(xr)))
		provisioned = provisioned && ptrValue(mp.Status.Initialization.InfrastructureProvisioned) &&
			len(mp.Spec.ProviderIDList) == int(want) && len(mp.Status.NodeRefs) == int(want)
		available = available && ready == want && avail == want
	}
	return lines, provisioned, available, nil
}

// WaitForExample reports the example's state whenever it changes until it
// is provisioned.
func (p *Plane) WaitForExample(ctx context.Context, machines int, timeout time.Duration, report func(Status)) error {
	return p.WaitForExampleOf(ctx, ExampleCluster, machines, timeout, report)
}

// WaitForExampleOf is WaitForExample for the example applied as name.
func (p *Plane) WaitForExampleOf(ctx context.Context, name string, machines int, timeout time.Duration, report func(Status)) error {
	return p.waitForExample(ctx, name, machines, timeout, report, "provisioned", func(st Status) bool { return st.Provisioned })
}

// WaitForExampleAvailable reports the state of the example applied as name
// whenever it changes until CAPI reports it Available.
func (p *Plane) WaitForExampleAvailable(ctx context.Context, name string, machines int, timeout time.Duration, report func(Status)) error {
	return p.waitForExample(ctx, name, machines, timeout, report, "Available", func(st Status) bool { return st.Available })
}

func (p *Plane) waitForExample(ctx context.Context, name string, machines int, timeout time.Duration, report func(Status), what string, done func(Status) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		st, err := p.ExampleStatusOf(ctx, name, machines)
		if err == nil {
			if now := strings.Join(st.Lines, "\n"); now != last {
				last = now
				report(st)
			}
			if done(st) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.Errorf("the example cluster was not %s within %s; last state:\n%s\n(logs in %s)", what, timeout, last, p.dir)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func endpoint(c *clusterv1.Cluster) string {
	if !c.Spec.ControlPlaneEndpoint.IsValid() {
		return "-"
	}
	return fmt.Sprintf("%s:%d", c.Spec.ControlPlaneEndpoint.Host, c.Spec.ControlPlaneEndpoint.Port)
}

func condition(conds []metav1.Condition, t string) string {
	c := meta.FindStatusCondition(conds, t)
	if c == nil {
		return t + " unknown"
	}
	s := fmt.Sprintf("%s=%s (%s)", t, c.Status, c.Reason)
	if c.Message != "" {
		s += ": " + oneLine(c.Message)
	}
	return s
}

// infraWords are CAPI's InfrastructureReady condition on a Cluster or
// Machine and, when the bridge has something to add, its verdict.
func infraWords(conds []metav1.Condition, infraReady string) string {
	s := condition(conds, infraReady)
	if meta.FindStatusCondition(conds, infrav1.CrossplaneInfrastructureReadyCondition) != nil {
		s += ", " + condition(conds, infrav1.CrossplaneInfrastructureReadyCondition)
	}
	return s
}

// xrWords are Crossplane's Ready and Synced conditions on an XR.
func xrWords(conds []metav1.Condition) string {
	return condition(conds, "Ready") + ", " + condition(conds, "Synced")
}

// infraXRs are the XRs of a namespace's Machines and MachinePools, each
// kind listed once per read of the example's state: one GET per Machine,
// twice a second while a benchmark waits for hundreds, loaded the API server
// it measures.
type infraXRs struct {
	p      *Plane
	ns     string
	byKind map[schema.GroupKind]map[string][]metav1.Condition
}

func (p *Plane) infraXRs(ns string) *infraXRs {
	return &infraXRs{p: p, ns: ns, byKind: map[schema.GroupKind]map[string][]metav1.Condition{}}
}

// conditions are the conditions of the XR ref names, whatever its kind; none
// when its kind cannot be listed.
func (x *infraXRs) conditions(ctx context.Context, ref clusterv1.ContractVersionedObjectReference) []metav1.Condition {
	gk := schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
	byName, ok := x.byKind[gk]
	if !ok {
		byName = x.list(ctx, gk)
		x.byKind[gk] = byName
	}
	return byName[ref.Name]
}

func (x *infraXRs) list(ctx context.Context, gk schema.GroupKind) map[string][]metav1.Condition {
	m, err := x.p.client.RESTMapper().RESTMapping(gk)
	if err != nil {
		return nil
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(m.GroupVersionKind.GroupVersion().WithKind(m.GroupVersionKind.Kind + "List"))
	if x.p.client.List(ctx, l, client.InNamespace(x.ns)) != nil {
		return nil
	}
	byName := make(map[string][]metav1.Condition, len(l.Items))
	for _, u := range l.Items {
		raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		conds := make([]metav1.Condition, 0, len(raw))
		for _, r := range raw {
			c := metav1.Condition{}
			if rm, ok := r.(map[string]any); ok && runtime.DefaultUnstructuredConverter.FromUnstructured(rm, &c) == nil {
				conds = append(conds, c)
			}
		}
		byName[u.GetName()] = conds
	}
	return byName
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ptrValue(b *bool) bool { return b != nil && *b }
