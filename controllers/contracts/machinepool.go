package contracts

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/predicates"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/bridge/gate"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/outputs"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

const (
	errGetOwnerMachinePool = "cannot get the owner MachinePool"
	errGetPoolCluster      = "cannot get the MachinePool's Cluster"
)

// infraMachinePool is the InfraMachinePool seam: the owner is a
// MachinePool; the XR stays paused until the pool's gate opens, and then
// follows its MachinePool (replicas, failure domains, version, bootstrap
// data); the providerIDList output goes to spec.providerIDList and its
// length to status.replicas, whenever they change.
type infraMachinePool struct {
	// infraMachine reads the cluster's infrastructure as for machines.
	infraMachine
}

// Owner is the MachinePool that owns the XR, and its Cluster; none until
// that Cluster exists, except for a deleting XR.
func (m infraMachinePool) Owner(ctx context.Context, s *Scope) error {
	mp, err := util.GetOwnerMachinePool(ctx, m.client, ownedBy(s.XR))
	if err = client.IgnoreNotFound(err); err != nil || mp == nil {
		return errors.Wrap(err, errGetOwnerMachinePool)
	}
	cluster, err := util.GetClusterByName(ctx, m.client, mp.Namespace, mp.Spec.ClusterName)
	if ok, err := ownedIn(s, mp, cluster, err, errGetPoolCluster); !ok {
		return err
	}
	s.Pool = mp
	return nil
}

// Prepare runs the pool's gate: closed, it returns why; open, it injects
// what changed of the MachinePool, and on the first opening the cluster's
// network and credentials, which the one deferred patch sends together
// with the unpause.
func (m infraMachinePool) Prepare(ctx context.Context, s *Scope) (*verdict.Verdict, error) {
	clusterXR, forbidden, err := m.clusterInfrastructure(ctx, s.Cluster)
	if err != nil || forbidden != nil {
		return forbidden, err
	}
	return inject(s, gate.DecidePool(gate.PoolInputs{MachinePool: s.Pool, Cluster: s.Cluster, ClusterXR: clusterXR, XR: &s.XR.Unstructured}))
}

// outputs maps providerIDList. A pool's provisioning is CAPI's to report on
// the MachinePool, as a machine's is on the Machine.
func (infraMachinePool) Outputs(s *Scope) (outputs.Fields, string, field.ErrorList) {
	out, errs := outputs.MapMachinePool(&s.XR.Unstructured)
	return out.Spec(), "", errs
}

// milestone is provisioned, v1beta1's ready (which CAPI's MachinePool
// controller reads), and the replicas: the machines spec.providerIDList
// names, so that CAPI never reads a count and a list that disagree.
func (infraMachinePool) Milestone(xr *unstructured.Unstructured) map[string]any {
	ids, _, _ := unstructured.NestedSlice(xr.Object, "spec", "providerIDList")
	return map[string]any{"status.initialization.provisioned": true, "status.ready": true, "status.replicas": int64(len(ids))}
}

func (infraMachinePool) Watches(k WatchEnv, gvk schema.GroupVersionKind, _ *unstructured.Unstructured) []Watch {
	return []Watch{
		// The MachinePool's spec (replicas, template, failure domains), its
		// deletion and the bridge's verdict on it; not CAPI's status writes
		// (node references, ready replicas).
		{Object: &clusterv1.MachinePool{}, Map: util.MachinePoolToInfrastructureMapFunc(k.Ctx, gvk),
			Predicates: []predicate.Predicate{predicate.Funcs{UpdateFunc: ownerChanged}}},
		// A pool whose instances need no bootstrap data waits for the
		// control plane.
		clusterGates(k, gvk, predicates.ClusterControlPlaneInitialized(k.Scheme, k.Log)),
	}
}
