package plan

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capxp/cluster-api-provider-crossplane/bridge/gate"
)

// A MachinePool's instances are its infrastructure's: CAPI replaces none of
// them, and a change of the MachinePool reaches them only through its XR,
// which the bridge keeps following the MachinePool (bridge/gate.DecidePool:
// the replicas, the failure domains, the version, the bootstrap data).
// Crossplane then changes what the XR composes in place, as a cloud's auto
// scaling group rolls its instances onto a new launch template.

// predictPool is what a change of a MachinePool does: its scale (instances
// the infrastructure adds or removes), and its XR as the bridge will write
// it, when that changes; or, while the bridge's gate stays closed (a
// failure domain the cluster does not report), why nothing of it moves.
// live is the MachinePool as it is, mp as the change leaves it; clusterXR
// and xr are the cluster's and the pool's XRs as the change leaves them.
func predictPool(cl *clusterv1.Cluster, live, mp *clusterv1.MachinePool, clusterXR, xr *unstructured.Unstructured) (*Scale, *unstructured.Unstructured, string, error) {
	scale := scaled("MachinePool/"+mp.Name, ptr.Deref(live.Spec.Replicas, 1), ptr.To(ptr.Deref(mp.Spec.Replicas, 1)))
	if xr == nil {
		return scale, nil, "", nil
	}
	d := gate.DecidePool(gate.PoolInputs{MachinePool: mp, Cluster: cl, ClusterXR: clusterXR, XR: xr})
	if !d.Ready {
		return nil, nil, fmt.Sprintf("MachinePool %s: the bridge does not follow it (%s): %s", mp.Name, d.Reason, d.Message), nil
	}
	if len(d.Spec) == 0 {
		return scale, nil, "", nil
	}
	out := xr.DeepCopy()
	if err := gate.Inject(out, d.Spec); err != nil {
		return nil, nil, "", err
	}
	return scale, out, "", nil
}
