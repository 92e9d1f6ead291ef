package gate

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

// ControlPlaneInputs is what the managed control plane's gate decides on.
type ControlPlaneInputs struct {
	// Cluster owns the control plane XR.
	Cluster *clusterv1.Cluster
	// ClusterXR is the cluster's infrastructure, once provisioned; nil for
	// a cluster without one.
	ClusterXR *unstructured.Unstructured
	// XR is the control plane XR.
	XR *unstructured.Unstructured
}

// DecideControlPlane opens the gate of a managed control plane once the
// cluster's infrastructure is provisioned: a service is placed in the
// cluster's network, which must exist first. It injects once, field by
// field, the network: the region, the network, the best subnet of each of
// the cluster's failure domains (private first) and the ControlPlane
// security groups. A field the XR holds was injected before, or is the
// control plane's own choice. A network injected before is not injected
// again, even where the XR lacks it: an adopted XRD whose schema has no
// spec.network prunes it, and would otherwise be sent it on every
// reconcile.
func DecideControlPlane(in ControlPlaneInputs) Decision {
	if !ptr.Deref(in.Cluster.Status.Initialization.InfrastructureProvisioned, false) {
		return Decision{Verdict: verdict.Verdict{Reason: infrav1.WaitingForClusterInfrastructureReason,
			Message: fmt.Sprintf("Waiting for the infrastructure of Cluster %s to be provisioned", in.Cluster.Name)}}
	}
	if in.ClusterXR == nil || injectedBefore(in.XR, "network") {
		return Decision{Verdict: verdict.Verdict{Ready: true}}
	}
	cluster := fieldpath.Pave(in.ClusterXR.Object)
	n := poolNetwork(cluster, nil)
	delete(n, "securityGroupIDs")
	var sg infrav1.NetworkOutputs
	if err := cluster.GetValueInto("status.outputs.network", &sg); err == nil {
		var groups []any
		for _, g := range sg.SecurityGroups {
			if g.ID != "" && g.Role == "ControlPlane" {
				groups = append(groups, g.ID)
			}
		}
		if len(groups) > 0 {
			n["securityGroupIDs"] = groups
		}
	}
	xr := fieldpath.Pave(in.XR.Object)
	for f := range n {
		if has(xr, "spec.network."+f) {
			delete(n, f)
		}
	}
	if len(n) == 0 {
		return Decision{Verdict: verdict.Verdict{Ready: true}}
	}
	return Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{"network": n},
		Sources: []string{fmt.Sprintf("spec.network: %s %s's status.outputs.network", in.ClusterXR.GetKind(), in.ClusterXR.GetName())}}
}

// injectedBefore says whether the bridge injected an XR's spec.<field>
// before: the XR's capxp.dev/injected-from annotation has its line, which
// outlives a field the XRD's schema prunes.
func injectedBefore(xr *unstructured.Unstructured, field string) bool {
	for _, line := range strings.Split(xr.GetAnnotations()[infrav1.InjectedFromAnnotation], "\n") {
		if strings.HasPrefix(line, "spec."+field+": ") {
			return true
		}
	}
	return false
}
