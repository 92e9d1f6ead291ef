package gate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

// PoolInputs are the objects the gate looks at for a machine pool XR.
type PoolInputs struct {
	// MachinePool owns the pool XR.
	MachinePool *clusterv1.MachinePool
	// Cluster is the MachinePool's cluster.
	Cluster *clusterv1.Cluster
	// ClusterXR is the cluster's infrastructure XR (any InfraCluster kind);
	// nil when it cannot be read.
	ClusterXR *unstructured.Unstructured
	// XR is the machine pool XR.
	XR *unstructured.Unstructured
}

// DecidePool opens a machine pool's gate once the cluster's infrastructure
// is provisioned and the MachinePool's bootstrap data secret is set (to a
// name, or to "" for instances that need no bootstrap data, once the
// cluster's control plane is initialized), and, unlike a
// machine's, keeps it following its MachinePool: a pool lives through
// changes a machine is replaced for. Every reconcile computes what the XR
// must hold and returns in Spec what differs (nil for a field to remove):
// the replicas, the failure domains (checked against the cluster's), the
// version and the bootstrap secret reference (never the data; none for "")
// follow the MachinePool; the network (the subnets of the pool's failure
// domains, the Node security groups) and the cluster's credentials are
// injected once, as for machines, and a pool that names its own credentials
// keeps them.
func DecidePool(in PoolInputs) Decision {
	mp := in.MachinePool
	xr := fieldpath.Pave(in.XR.Object)
	if !ptr.Deref(in.Cluster.Status.Initialization.InfrastructureProvisioned, false) {
		return Decision{Verdict: verdict.Verdict{Reason: infrav1.WaitingForClusterInfrastructureReason,
			Message: fmt.Sprintf("Waiting for the infrastructure of Cluster %s to be provisioned", in.Cluster.Name)}}
	}
	// CAPI's contract: no data secret name yet is bootstrap data to come;
	// an empty one is a pool whose instances need none (a cloud's managed
	// node group bootstraps them itself).
	if mp.Spec.Template.Spec.Bootstrap.DataSecretName == nil {
		return Decision{Verdict: verdict.Verdict{Reason: infrav1.WaitingForBootstrapDataReason,
			Message: fmt.Sprintf("Waiting for the bootstrap data secret of MachinePool %s", mp.Name)}}
	}
	secret := *mp.Spec.Template.Spec.Bootstrap.DataSecretName
	// Bootstrap data comes once the control plane is initialized (CAPI's
	// bootstrap providers wait for it); instances that need none would join
	// a control plane that may not exist yet: they wait for it here.
	if secret == "" && !controlPlaneInitialized(in.Cluster) {
		return Decision{Verdict: verdict.Verdict{Reason: infrav1.WaitingForControlPlaneReason,
			Message: fmt.Sprintf("Waiting for the control plane of Cluster %s to be initialized: the instances of MachinePool %s need no bootstrap data and join it directly", in.Cluster.Name, mp.Name)}}
	}
	var cluster *fieldpath.Paved
	clusterName := "the cluster's infrastructure"
	if in.ClusterXR != nil {
		cluster = fieldpath.Pave(in.ClusterXR.Object)
		clusterName = fmt.Sprintf("%s %s", in.ClusterXR.GetKind(), in.ClusterXR.GetName())
	}
	known := failureDomains(cluster)
	for _, fd := range mp.Spec.FailureDomains {
		if slices.Contains(known, fd) {
			continue
		}
		msg := fmt.Sprintf("MachinePool.spec.failureDomains %q is not one of the cluster's failure domains", fd)
		if len(known) == 0 {
			msg = fmt.Sprintf("MachinePool.spec.failureDomains %q is set but the cluster reports no failure domains", fd)
		} else {
			msg += ": " + strings.Join(known, ", ")
		}
		return Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidFailureDomainReason, Message: msg}}
	}

	// What follows the MachinePool. CAPI defaults a MachinePool's replicas
	// to 1 in its webhook; a MachinePool that skipped it gets the same.
	follow := map[string]any{"replicas": int64(ptr.Deref(mp.Spec.Replicas, 1))}
	from := map[string]string{"replicas": "MachinePool.spec.replicas"}
	// A nil value is a field the MachinePool no longer sets: the XR must not
	// hold it either.
	follow[specBootstrap], follow["failureDomains"], follow["version"] = nil, nil, nil
	if secret != "" {
		follow[specBootstrap] = map[string]any{"dataSecretRef": map[string]any{"name": secret, "key": BootstrapDataKey}}
		from[specBootstrap] = fmt.Sprintf("MachinePool %s's bootstrap data secret %s", mp.Name, secret)
	}
	// A MachinePool that names no failure domains spreads over every one of
	// the cluster's, as a cloud's pool over every subnet: the composition
	// is told which, as it cannot read the cluster.
	fds, fdsFrom := mp.Spec.FailureDomains, "MachinePool.spec.failureDomains"
	if len(fds) == 0 {
		fds, fdsFrom = known, "the Cluster's failure domains (MachinePool.spec.failureDomains is empty)"
	}
	if len(fds) > 0 {
		l := make([]any, 0, len(fds))
		for _, fd := range fds {
			l = append(l, fd)
		}
		follow["failureDomains"] = l
	}
	if v := mp.Spec.Template.Spec.Version; v != "" {
		follow["version"] = v
	}
	from["failureDomains"] = fdsFrom
	from["version"] = "MachinePool.spec.template.spec.version"
	spec := map[string]any{}
	for k, want := range follow {
		got, err := xr.GetValue("spec." + k)
		switch {
		case want == nil && err != nil:
		case want == nil || err != nil || !equality.Semantic.DeepEqual(normalize(got), normalize(want)):
			spec[k] = want
		}
	}
	// What is injected once, field by field: what the XR holds was injected
	// before, or is the pool's own choice (a template may name a network
	// where the cluster's infrastructure reports none).
	n := poolNetwork(cluster, mp.Spec.FailureDomains)
	for f := range n {
		if has(xr, "spec.network."+f) {
			delete(n, f)
		}
	}
	if len(n) > 0 {
		spec["network"] = n
		from["network"] = clusterName + "'s status.outputs.network"
	}
	if cluster != nil && !has(xr, "spec.providerConfigRef") {
		if ref, err := cluster.GetValue("spec.providerConfigRef"); err == nil && ref != nil {
			spec["providerConfigRef"] = ref
			from["providerConfigRef"] = clusterName + "'s spec.providerConfigRef"
		}
	}
	if len(spec) == 0 {
		return Decision{Verdict: verdict.Verdict{Ready: true}}
	}
	sources := make([]string, 0, len(spec))
	for k, v := range spec {
		if v != nil {
			sources = append(sources, fmt.Sprintf("spec.%s: %s", k, from[k]))
		}
	}
	sort.Strings(sources)
	return Decision{Verdict: verdict.Verdict{Ready: true}, Spec: spec, Sources: sources}
}

// normalize makes an unstructured value and the value the gate computes
// comparable: JSON numbers as int64, lists of strings as []any.
func normalize(v any) any {
	switch t := v.(type) {
	case int:
		return int64(t)
	case int32:
		return int64(t)
	case float64:
		return int64(t)
	case []string:
		out := make([]any, 0, len(t))
		for _, s := range t {
			out = append(out, s)
		}
		return out
	}
	return v
}

// poolNetwork picks, from the cluster XR, the region, the network, one
// subnet per failure domain of the pool (every failure domain's when it
// names none; private subnets first) and the Node security groups.
func poolNetwork(cluster *fieldpath.Paved, fds []string) map[string]any {
	if cluster == nil {
		return nil
	}
	out, _ := network(cluster, "", false)
	delete(out, "subnetID")
	var n infrav1.NetworkOutputs
	if err := cluster.GetValueInto("status.outputs.network", &n); err != nil {
		return out
	}
	// The best subnet of each failure domain (a private one over a public
	// one), in the order the cluster reports them.
	best := map[string]infrav1.SubnetOutput{}
	var order []string
	for _, sn := range n.Subnets {
		if sn.ID == "" || len(fds) > 0 && !slices.Contains(fds, sn.FailureDomain) {
			continue
		}
		prev, seen := best[sn.FailureDomain]
		if !seen {
			order = append(order, sn.FailureDomain)
		}
		if !seen || sn.Role == string(infrav1.SubnetRolePrivate) && prev.Role != string(infrav1.SubnetRolePrivate) {
			best[sn.FailureDomain] = sn
		}
	}
	var subnets []any
	for _, fd := range order {
		subnets = append(subnets, best[fd].ID)
	}
	if len(subnets) > 0 {
		out["subnetIDs"] = subnets
	}
	return out
}

// controlPlaneInitialized reads what CAPI says of the cluster's control
// plane: its ControlPlaneInitialized condition, which CAPI computes with or
// without a controlPlaneRef (from the control-plane Machines' Nodes when
// there is none), or status.initialization.controlPlaneInitialized, which
// it sets only from a controlPlaneRef's object.
func controlPlaneInitialized(c *clusterv1.Cluster) bool {
	return conditions.IsTrue(c, clusterv1.ClusterControlPlaneInitializedCondition) ||
		ptr.Deref(c.Status.Initialization.ControlPlaneInitialized, false)
}
