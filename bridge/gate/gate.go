// Package gate decides when a machine XR may be composed, and what the bridge
// injects into its spec when it may. Crossplane composes an XR the moment it
// exists, but a CAPI InfraMachine must wait for its cluster's infrastructure
// and its bootstrap data; the bridge keeps the XR paused until this gate
// opens, then injects and unpauses it in one patch.
package gate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

// BootstrapDataKey is the key of CAPI's bootstrap data secrets.
const BootstrapDataKey = "value"

// specBootstrap is the XR spec field holding the bootstrap reference.
const specBootstrap = "bootstrap"

// Inputs are the objects the gate looks at.
type Inputs struct {
	// Machine owns the machine XR.
	Machine *clusterv1.Machine
	// Cluster is the Machine's cluster.
	Cluster *clusterv1.Cluster
	// ClusterXR is the cluster's infrastructure XR (any InfraCluster kind);
	// nil when it cannot be read.
	ClusterXR *unstructured.Unstructured
	// XR is the machine XR.
	XR *unstructured.Unstructured
	// ProviderID is the provider ID template of the Composition the XR will
	// compose with (its capxp.dev/provider-id annotation), and
	// ProviderIDFrom names that Composition; empty when it declares none,
	// or when the Compositions the XR may select disagree.
	ProviderID, ProviderIDFrom string
}

// Decision is the gate's verdict.
type Decision struct {
	// Verdict is Ready when the machine XR may be composed (the gate is
	// open); its Reason and Message say why not, when closed.
	verdict.Verdict
	// Spec holds the spec fields to inject, keyed by their name under spec,
	// nil for one to remove; empty when there is nothing to inject (the gate
	// opened before).
	Spec map[string]any
	// Sources say, when the gate injects, where each field the composition
	// gets came from: "spec.network.subnetID: CrossplaneCluster demo's
	// status.outputs.network", "spec.network.region: the machine's own
	// spec". Sorted.
	Sources []string
}

// Decide opens the gate once the cluster's infrastructure is provisioned and
// the Machine's bootstrap data secret is set, and computes what to inject:
// the bootstrap secret reference (never the data), the failure domain
// (checked against the cluster's), from the cluster XR the network (its
// region, the subnet of that failure domain and the security groups of the
// machine's role), and the cluster's credentials unless the machine names
// its own, and the provider ID the Composition declares. Once injected, the
// gate stays open; a dataSecretRef that the bridge did not inject (preset in
// a template) closes it for good.
func Decide(in Inputs) Decision {
	xr := fieldpath.Pave(in.XR.Object)
	secret := ptr.Deref(in.Machine.Spec.Bootstrap.DataSecretName, "")

	// spec.bootstrap.dataSecretRef is the bridge's to set (and immutable
	// once set): one preset in a template or by hand must name the Machine's
	// own bootstrap data, or the machine would boot from someone else's.
	injected := false
	if name, _ := xr.GetString("spec.bootstrap.dataSecretRef.name"); name != "" {
		key, _ := xr.GetString("spec.bootstrap.dataSecretRef.key")
		if name != secret || key != BootstrapDataKey {
			want := fmt.Sprintf("Machine %s has no bootstrap data secret yet", in.Machine.Name)
			if secret != "" {
				want = fmt.Sprintf("Machine %s's bootstrap data is %s/%s", in.Machine.Name, secret, BootstrapDataKey)
			}
			return Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidBootstrapDataRefReason,
				Message: fmt.Sprintf("spec.bootstrap.dataSecretRef %s/%s is set by the bridge, not preset: %s; recreate the machine without it", name, key, want)}}
		}
		injected = true
	}
	// spec.providerID is the bridge's to write too: from the Composition's
	// declaration when the gate opens, or from what the Composition
	// reports. One preset before then could name another namespace's
	// machine, and a Composition that registers it (a Node of a shared
	// workload cluster) would take that machine over.
	if id, _ := xr.GetString("spec.providerID"); id != "" && !injected {
		return Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidProviderIDReason,
			Message: fmt.Sprintf("spec.providerID %q is set by the bridge, not preset: a machine's provider ID is the one its Composition declares or reports; recreate the machine without it", id)}}
	}
	if !injected && !ptr.Deref(in.Cluster.Status.Initialization.InfrastructureProvisioned, false) {
		return Decision{Verdict: verdict.Verdict{Reason: infrav1.WaitingForClusterInfrastructureReason,
			Message: fmt.Sprintf("Waiting for the infrastructure of Cluster %s to be provisioned", in.Cluster.Name)}}
	}
	if secret == "" {
		return Decision{Verdict: verdict.Verdict{Reason: infrav1.WaitingForBootstrapDataReason,
			Message: fmt.Sprintf("Waiting for the bootstrap data secret of Machine %s", in.Machine.Name)}}
	}

	spec := map[string]any{
		specBootstrap: map[string]any{"dataSecretRef": map[string]any{"name": secret, "key": BootstrapDataKey}},
	}
	var cluster *fieldpath.Paved
	if in.ClusterXR != nil {
		cluster = fieldpath.Pave(in.ClusterXR.Object)
	}

	fd := in.Machine.Spec.FailureDomain
	if preset, _ := xr.GetString("spec.failureDomain"); preset != "" && preset != fd {
		return Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidFailureDomainReason,
			Message: fmt.Sprintf("spec.failureDomain %q differs from Machine.spec.failureDomain %q, where CAPI placed the machine", preset, fd)}}
	}
	// A host that already exists (spec.parameters.host) stays where it is:
	// CAPI may place its Machine only there, or nowhere in particular.
	placed, field := fd, "Machine.spec.failureDomain"
	if host, _ := xr.GetString("spec.parameters.host.failureDomain"); host != "" {
		if fd != "" && fd != host {
			return Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidFailureDomainReason,
				Message: fmt.Sprintf("Machine.spec.failureDomain %q is not where the existing host is (spec.parameters.host.failureDomain %q): place the Machine in %q or in no failure domain", fd, host, host)}}
		}
		placed, field = host, "spec.parameters.host.failureDomain"
	}
	// Once the machine is composed its failure domain is settled: the
	// cluster's list changing later does not close the gate again.
	if placed != "" && !injected {
		known := failureDomains(cluster)
		if !slices.Contains(known, placed) {
			msg := fmt.Sprintf("%s %q is not one of the cluster's failure domains", field, placed)
			if len(known) == 0 {
				msg = fmt.Sprintf("%s %q is set but the cluster reports no failure domains", field, placed)
			} else {
				msg += ": " + strings.Join(known, ", ")
			}
			return Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidFailureDomainReason, Message: msg}}
		}
	}
	if fd != "" {
		spec["failureDomain"] = fd
	}
	// A provider ID known before composing goes in with the rest, so that
	// the XR gets no new generation once it is Ready. Only on the first
	// opening: a machine composed before has its Composition's report.
	if in.ProviderID != "" && !injected {
		id, err := ProviderID(in.ProviderID, in.XR)
		if err != nil {
			return Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidOutputsReason,
				Message: fmt.Sprintf("%s's %s annotation: %v", in.ProviderIDFrom, infrav1.ProviderIDAnnotation, err)}}
		}
		spec["providerID"] = id
	}

	from := map[string]string{
		specBootstrap:   fmt.Sprintf("Machine %s's bootstrap data secret %s", in.Machine.Name, secret),
		"failureDomain": "Machine.spec.failureDomain",
		"providerID":    fmt.Sprintf("%s's %s annotation", in.ProviderIDFrom, infrav1.ProviderIDAnnotation),
	}
	clusterName := "the cluster's infrastructure"
	if in.ClusterXR != nil {
		clusterName = fmt.Sprintf("%s %s", in.ClusterXR.GetKind(), in.ClusterXR.GetName())
	}
	n, nfrom := network(cluster, placed, util.IsControlPlaneMachine(in.Machine))
	if len(n) > 0 {
		spec["network"] = n
	}
	if cluster != nil {
		if ref, err := cluster.GetValue("spec.providerConfigRef"); err == nil && ref != nil {
			spec["providerConfigRef"] = ref
			from["providerConfigRef"] = clusterName + "'s spec.providerConfigRef"
		}
	}
	var sources []string
	// Inject only what the XR lacks: what it holds was injected before (or
	// is the machine's own choice, as its credentials), and is kept. Before
	// the first injection, the network is completed field by field: a
	// machine template may name its region, subnet or security groups
	// where the cluster's infrastructure reports none.
	for k := range spec {
		own, err := xr.GetValue("spec." + k)
		if err != nil {
			continue
		}
		mine, isMap := own.(map[string]any)
		if k != "network" || injected || !isMap {
			delete(spec, k)
			continue
		}
		for f := range n {
			if _, ok := mine[f]; ok {
				delete(n, f)
			}
		}
		if len(n) == 0 {
			delete(spec, k)
		}
	}
	if len(spec) == 0 {
		return Decision{Verdict: verdict.Verdict{Ready: true}}
	}
	// Where each field the composition gets comes from.
	if _, injecting := spec["providerID"]; injecting {
		sources = append(sources, "spec.providerID: "+from["providerID"])
	}
	for _, k := range []string{specBootstrap, "failureDomain", "providerConfigRef"} {
		switch _, injecting := spec[k]; {
		case injecting:
			sources = append(sources, fmt.Sprintf("spec.%s: %s", k, from[k]))
		case has(xr, "spec."+k):
			sources = append(sources, fmt.Sprintf("spec.%s: the machine's own spec", k))
		}
	}
	for _, f := range []string{"region", "networkID", "subnetID", "securityGroupIDs"} {
		switch _, injecting := n[f]; {
		case injecting && spec["network"] != nil:
			sources = append(sources, fmt.Sprintf("spec.network.%s: %s's %s", f, clusterName, nfrom[f]))
		case has(xr, "spec.network."+f):
			sources = append(sources, fmt.Sprintf("spec.network.%s: the machine's own spec", f))
		}
	}
	sort.Strings(sources)
	return Decision{Verdict: verdict.Verdict{Ready: true}, Spec: spec, Sources: sources}
}

func has(p *fieldpath.Paved, path string) bool {
	_, err := p.GetValue(path)
	return err == nil
}

func failureDomains(cluster *fieldpath.Paved) []string {
	if cluster == nil {
		return nil
	}
	var fds []map[string]any
	if err := cluster.GetValueInto("status.failureDomains", &fds); err != nil {
		return nil
	}
	names := make([]string, 0, len(fds))
	for _, fd := range fds {
		if n, ok := fd["name"].(string); ok && n != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// network picks, from the cluster XR's status.outputs.network, the network,
// the subnet of the machine's failure domain (private subnets first) and the
// security groups of its role, and the cluster's region from its parameters;
// and says where in the cluster XR each came from.
func network(cluster *fieldpath.Paved, fd string, controlPlane bool) (map[string]any, map[string]string) {
	if cluster == nil {
		return nil, nil
	}
	from := map[string]string{"region": "spec.parameters.region"}
	out := map[string]any{}
	if r, err := cluster.GetString("spec.parameters.region"); err == nil && r != "" {
		out["region"] = r
	}
	var n infrav1.NetworkOutputs
	if err := cluster.GetValueInto("status.outputs.network", &n); err != nil {
		return out, from
	}
	for _, f := range []string{"networkID", "subnetID", "securityGroupIDs"} {
		from[f] = "status.outputs.network"
	}
	if n.ID != "" {
		out["networkID"] = n.ID
	}
	var subnet string
	for _, s := range n.Subnets {
		if fd != "" && s.FailureDomain != fd {
			continue
		}
		if subnet == "" || s.Role == string(infrav1.SubnetRolePrivate) {
			subnet = s.ID
		}
		if s.Role == string(infrav1.SubnetRolePrivate) {
			break
		}
	}
	if subnet != "" {
		out["subnetID"] = subnet
	}
	var groups []any
	for _, g := range n.SecurityGroups {
		if g.ID != "" && (g.Role == "Node" || controlPlane && g.Role == "ControlPlane") {
			groups = append(groups, g.ID)
		}
	}
	if len(groups) > 0 {
		out["securityGroupIDs"] = groups
	}
	return out, from
}

// Inject applies an open gate's spec fields to an XR: a map field completes
// what the XR holds (the network a template named), nil removes one, any
// other replaces it.
func Inject(xr *unstructured.Unstructured, spec map[string]any) error {
	for k, v := range spec {
		if v == nil {
			unstructured.RemoveNestedField(xr.Object, "spec", k)
			continue
		}
		own, _, _ := unstructured.NestedFieldNoCopy(xr.Object, "spec", k)
		mine, isMap := own.(map[string]any)
		fields, ok := v.(map[string]any)
		if isMap && ok {
			for f, fv := range fields {
				mine[f] = fv
			}
			continue
		}
		if err := unstructured.SetNestedField(xr.Object, v, "spec", k); err != nil {
			return fmt.Errorf("cannot inject spec.%s: %w", k, err)
		}
	}
	return nil
}
