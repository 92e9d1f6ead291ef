package plane

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// Example is the cluster in examples/local (embedded in package capxp).
const (
	ExampleNamespace = "capxp-demo"
	ExampleCluster   = "demo"
	ExampleMachines  = 3
)

// ApplyExample creates the Secrets holding the workload cluster's kubeconfig
// (for provider-kubernetes and for CAPI) and applies examples/local.
func (p *Plane) ApplyExample(ctx context.Context) error {
	objs, err := readManifests(capxp.LocalExample)
	if err != nil {
		return err
	}
	// The namespace first, then the Secrets the example's objects read.
	if err := p.create(ctx, objs[0]); err != nil {
		return err
	}
	secrets := []*corev1.Secret{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: ExampleNamespace, Name: "workload-kubeconfig"},
			Data:       map[string][]byte{"kubeconfig": p.Workload.Kubeconfig},
		},
		{
			// CAPI reads a workload cluster's kubeconfig from
			// <cluster>-kubeconfig, which a control-plane provider writes.
			ObjectMeta: metav1.ObjectMeta{Namespace: ExampleNamespace, Name: ExampleCluster + "-kubeconfig",
				Labels: map[string]string{clusterv1.ClusterNameLabel: ExampleCluster}},
			Type: clusterv1.ClusterSecretType,
			Data: map[string][]byte{"value": p.Workload.Kubeconfig},
		},
	}
	for _, s := range secrets {
		if err := p.client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return errors.Wrapf(err, "cannot create Secret %s", s.Name)
		}
	}
	for _, o := range objs[1:] {
		if err := p.create(ctx, o); err != nil {
			return err
		}
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
	// Provisioned: the cluster's infrastructure is provisioned and every
	// machine has a providerID and a Node.
	Provisioned bool
}

// ExampleStatus reads the example cluster's state.
func (p *Plane) ExampleStatus(ctx context.Context, machines int) (Status, error) {
	c := p.client
	var st Status
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ExampleNamespace, Name: ExampleCluster}, cluster); err != nil {
		return st, err
	}
	infra := ptrValue(cluster.Status.Initialization.InfrastructureProvisioned)
	xr := &infrav1.CrossplaneCluster{}
	_ = c.Get(ctx, client.ObjectKey{Namespace: ExampleNamespace, Name: ExampleCluster}, xr)
	st.Lines = append(st.Lines, fmt.Sprintf("Cluster %s: phase %s, infrastructure provisioned %t, endpoint %s; %s; XR %s",
		cluster.Name, orDash(cluster.Status.Phase), infra, endpoint(cluster), infraWords(cluster.Status.Conditions, clusterv1.ClusterInfrastructureReadyCondition), xrWords(xr.Status.Conditions)))

	ms := &clusterv1.MachineList{}
	if err := c.List(ctx, ms, client.InNamespace(ExampleNamespace), client.MatchingLabels{clusterv1.ClusterNameLabel: ExampleCluster}); err != nil {
		return st, err
	}
	sort.Slice(ms.Items, func(i, j int) bool { return ms.Items[i].Name < ms.Items[j].Name })
	ready := 0
	for i := range ms.Items {
		m := &ms.Items[i]
		mxr := &infrav1.CrossplaneMachine{}
		_ = c.Get(ctx, client.ObjectKey{Namespace: ExampleNamespace, Name: m.Spec.InfrastructureRef.Name}, mxr)
		node := "-"
		if m.Status.NodeRef.IsDefined() {
			node = m.Status.NodeRef.Name
		}
		if m.Spec.ProviderID != "" && node != "-" {
			ready++
		}
		st.Lines = append(st.Lines, fmt.Sprintf("  Machine %s: phase %s, providerID %s, node %s; %s; XR %s",
			m.Name, orDash(m.Status.Phase), orDash(m.Spec.ProviderID), node,
			infraWords(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition), xrWords(mxr.Status.Conditions)))
	}
	st.Provisioned = infra && len(ms.Items) == machines && ready == machines
	return st, nil
}

// WaitForExample reports the example's state whenever it changes until it
// is provisioned.
func (p *Plane) WaitForExample(ctx context.Context, machines int, timeout time.Duration, report func(Status)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		st, err := p.ExampleStatus(ctx, machines)
		if err == nil {
			if now := strings.Join(st.Lines, "\n"); now != last {
				last = now
				report(st)
			}
			if st.Provisioned {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.Errorf("the example cluster was not provisioned within %s; last state:\n%s\n(logs in %s)", timeout, last, p.dir)
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

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ptrValue(b *bool) bool { return b != nil && *b }
