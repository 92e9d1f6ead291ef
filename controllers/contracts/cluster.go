package contracts

import (
	"context"
	"fmt"
	"sort"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/contract"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/outputs"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

const errGetOwnerCluster = "cannot get the owner Cluster"

// infraCluster is the InfraCluster seam: the owner is a Cluster; the
// endpoint output goes to spec.controlPlaneEndpoint; deletion waits for the
// cluster's Machines.
type infraCluster struct {
	infrastructure
	client client.Client
}

func (c infraCluster) Owner(ctx context.Context, s *Scope) error {
	cluster, err := util.GetOwnerCluster(ctx, c.client, ownedBy(s.XR))
	if err = client.IgnoreNotFound(err); err != nil || cluster == nil {
		return errors.Wrap(err, errGetOwnerCluster)
	}
	s.Owner, s.Cluster = cluster, cluster
	return nil
}

// ownedBy is what CAPI's owner lookups read of an XR: its namespace and
// owner references.
func ownedBy(xr *composite.Unstructured) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: xr.GetNamespace(), OwnerReferences: xr.GetOwnerReferences()}
}

// pauseUnowned: crossplane.io/paused on an adapted XR is derived from CAPI's
// pause, also before the Cluster owns it. An XR that names an owner the
// bridge cannot read (yet), or that has composed, is left as it is: one that
// `clusterctl move` just created arrives paused, with its owner reference
// set and its composed resources still to come, and must not compose before
// they do.
func (infraCluster) PauseUnowned(xr *composite.Unstructured) *bool {
	if len(xr.GetOwnerReferences()) > 0 || len(xr.GetResourceReferences()) > 0 {
		return nil
	}
	return ptr.To(annotations.HasPaused(xr))
}

// prepare learns whether the Cluster's control plane provides the
// endpoint: a managed control plane, an XR of a ControlPlane XRD, does.
func (c infraCluster) Prepare(ctx context.Context, s *Scope) (*verdict.Verdict, error) {
	managed, err := c.managedControlPlane(ctx, s.Cluster)
	s.EndpointFromControlPlane = managed
	return nil, err
}

// managedControlPlane says whether the Cluster's controlPlaneRef names a
// kind of a ControlPlane XRD: a managed control plane whose service
// provides the cluster's endpoint.
func (c infraCluster) managedControlPlane(ctx context.Context, cluster *clusterv1.Cluster) (bool, error) {
	if cluster == nil || !cluster.Spec.ControlPlaneRef.IsDefined() {
		return false, nil
	}
	ref := cluster.Spec.ControlPlaneRef
	// An XRD is named after its kind's resource and group.
	m, err := c.client.RESTMapper().RESTMapping(schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind})
	if apimeta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, errors.Wrapf(err, "cannot find the resource of the control plane kind %s", ref.Kind)
	}
	x := &xpextv2.CompositeResourceDefinition{}
	if err := c.client.Get(ctx, client.ObjectKey{Name: m.Resource.Resource + "." + ref.APIGroup}, x, client.UnsafeDisableDeepCopy); err != nil {
		return false, errors.Wrap(client.IgnoreNotFound(err), "cannot get the control plane's CompositeResourceDefinition")
	}
	return x.Labels[infrav1.ContractLabel] == infrav1.ContractControlPlane && x.Spec.Names.Kind == ref.Kind, nil
}

// outputs maps the endpoint and the failure domains. Under a managed
// control plane the service's endpoint is the cluster's: the
// infrastructure's is neither required nor copied, so that CAPI takes the
// control plane's (it copies an infrastructure endpoint first).
func (infraCluster) Outputs(s *Scope) (outputs.Fields, string, field.ErrorList) {
	out, errs := outputs.MapCluster(&s.XR.Unstructured)
	if s.EndpointFromControlPlane {
		return out.Spec(true), "Infrastructure provisioned; the managed control plane provides the endpoint", outputs.EndpointNotRequired(errs)
	}
	return out.Spec(false), fmt.Sprintf("Infrastructure provisioned; control plane endpoint %s:%d", out.Endpoint.Host, out.Endpoint.Port), errs
}

// waitBeforeDelete holds a cluster XR's deletion while Machines of its
// cluster exist: each Machine waits for its machine XR, so networking never
// goes before the machines that use it.
func (c infraCluster) WaitBeforeDelete(ctx context.Context, xr *composite.Unstructured) (*verdict.Verdict, error) {
	name := xr.GetLabels()[clusterv1.ClusterNameLabel]
	if name == "" {
		return nil, nil
	}
	machines := &clusterv1.MachineList{}
	if err := c.client.List(ctx, machines, client.InNamespace(xr.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return nil, errors.Wrap(err, "cannot list the cluster's Machines")
	}
	if len(machines.Items) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(machines.Items))
	for i := range machines.Items {
		names = append(names, machines.Items[i].Name)
	}
	sort.Strings(names)
	return &verdict.Verdict{Reason: infrav1.WaitingForMachinesReason, Message: contract.Waiting("Machines of Cluster "+name, names)}, nil
}

func (infraCluster) Watches(k WatchEnv, gvk schema.GroupVersionKind, xr *unstructured.Unstructured) []Watch {
	return []Watch{
		// The Cluster's pause and ownership, on every Cluster event.
		// Narrowed to CAPI's pause and provisioning transitions, a deleting
		// XR once missed the deletion of a composed resource (the metadata
		// watch the ObjectTracker started delivered no event) and waited for
		// the resync; until that is understood, every Cluster event wakes
		// the XR.
		{Object: &clusterv1.Cluster{}, Map: util.ClusterToInfrastructureMapFunc(k.Ctx, gvk, k.Client, xr)},
		machineDeletions(k.Client, infrastructureRef, gvk),
	}
}

func infrastructureRef(c *clusterv1.Cluster) clusterv1.ContractVersionedObjectReference {
	return c.Spec.InfrastructureRef
}

// machineDeletions wakes the XR a Cluster references (ref says which
// reference) when one of the cluster's Machines is deleted: a deleting XR
// waits for them to go; nothing else about a Machine concerns it.
func machineDeletions(c client.Client, ref func(*clusterv1.Cluster) clusterv1.ContractVersionedObjectReference, gvk schema.GroupVersionKind) Watch {
	return Watch{Object: &clusterv1.Machine{}, Map: machineToCluster(c, ref, gvk),
		Predicates: []predicate.Predicate{predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			UpdateFunc:  func(event.UpdateEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		}}}
}

// referenced is the request for the object a Cluster's reference names,
// when it is of the given kind.
func referenced(cluster *clusterv1.Cluster, ref clusterv1.ContractVersionedObjectReference, gvk schema.GroupVersionKind) []reconcile.Request {
	if ref.APIGroup != gvk.Group || ref.Kind != gvk.Kind || ref.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}}}
}

// machineToCluster maps a Machine to the XR its Cluster references, when
// that is of the given kind.
func machineToCluster(c client.Client, ref func(*clusterv1.Cluster) clusterv1.ContractVersionedObjectReference, gvk schema.GroupVersionKind) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[clusterv1.ClusterNameLabel]
		if name == "" {
			return nil
		}
		cluster := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: name}, cluster); err != nil {
			return nil
		}
		return referenced(cluster, ref(cluster), gvk)
	}
}

// reselects: an InfraCluster created from a ClusterClass is re-templated in place.
func (infraCluster) Reselects() bool { return true }
