package plan

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/exp/topology/desiredstate"
	"sigs.k8s.io/cluster-api/exp/topology/scope"
	"sigs.k8s.io/cluster-api/util/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// A Cluster with a managed topology is CAPI's topology controller's to
// change: a change of the Cluster's topology, of its ClusterClass or of a
// template the class names reaches its MachineDeployments, its control plane
// and its infrastructure only through what that controller computes. plan
// computes it as the controller does, with CAPI's own generator
// (exp/topology/desiredstate: the class's templates, the Cluster's
// variables, the class's inline patches), then hands what it would write to
// the rules above: a MachineDeployment or a control plane is planned as if
// the change were made to it, and an XR the topology patches is rendered as
// patched.

// topologyChange is what CAPI's topology controller makes of one Cluster.
type topologyChange struct {
	// xrs are the XRs it patches (the infrastructure cluster, a control
	// plane that is an XR), merged onto the live ones; only those that
	// change.
	xrs []*unstructured.Unstructured
	// templates are the templates it creates in place of those it rotates,
	// under the names plan gives them (newTemplateName): what CAPI's rules
	// read of an owner's new template.
	templates []*unstructured.Unstructured
	// unknown says what plan could not compute.
	unknown []string
}

// predictTopology computes what CAPI's topology controller does with cl as
// the change leaves it, and puts the MachineDeployments and control plane it
// would write into mds and kcps for the rollout rules.
//
// r reads the cluster as the change leaves it, o is what plan observed as
// the change leaves it, cl the Cluster as the change leaves it; live, lo and
// liveCl are the same as they are now. The controller's desired state of
// the Cluster as it is now is what it last applied: a field it then set and
// no longer sets is removed by its server-side apply, which plan mirrors.
func predictTopology(ctx context.Context, r, live client.Client, o, lo *Observed, cl, liveCl *clusterv1.Cluster,
	mds map[string]*clusterv1.MachineDeployment, kcps map[string]*controlplanev1.KubeadmControlPlane, mps map[string]*clusterv1.MachinePool) (topologyChange, error) {
	var out topologyChange
	s, desired, unknown, err := desiredOf(ctx, r, o, cl, mds, mps)
	if err != nil || unknown != "" {
		if unknown != "" {
			out.unknown = append(out.unknown, unknown)
		}
		return out, err
	}
	_, previous, unknown, err := desiredOf(ctx, live, lo, liveCl, byName(lo.MachineDeployments), byName(lo.MachinePools))
	if err != nil || unknown != "" || previous == nil {
		out.unknown = append(out.unknown, fmt.Sprintf("what CAPI's topology controller applied to Cluster %s before the change cannot be computed (%v%s): a field it stops setting is not predicted", cl.Name, err, unknown))
		previous = &scope.ClusterState{ControlPlane: &scope.ControlPlaneState{}}
	}
	if previous.ControlPlane == nil {
		previous.ControlPlane = &scope.ControlPlaneState{}
	}

	// The infrastructure cluster is patched in place.
	if xr, changed, err := patched(o.InfraClusters[cl.Name], dropped(desired.InfrastructureCluster, previous.InfrastructureCluster)); err != nil {
		return out, err
	} else if changed {
		out.xrs = append(out.xrs, xr)
	}

	// The control plane: its machine template is rotated when its spec
	// changes, the object itself patched.
	if cp := desired.ControlPlane; cp != nil && cp.Object != nil {
		rotated := rotates(s.Current.ControlPlane.InfrastructureMachineTemplate, dropped(cp.InfrastructureMachineTemplate, previous.ControlPlane.InfrastructureMachineTemplate))
		cpObject := dropped(cp.Object, previous.ControlPlane.Object)
		if rotated {
			out.templates = append(out.templates, renamed(cp.InfrastructureMachineTemplate, newTemplateName(cl.Name, "")))
			_ = unstructured.SetNestedField(cpObject.Object, newTemplateName(cl.Name, ""),
				"spec", "machineTemplate", "spec", "infrastructureRef", "name")
		}
		if kcp, ok := kcps[cp.Object.GetName()]; ok && cp.Object.GroupVersionKind().GroupKind() == controlplanev1.GroupVersion.WithKind("KubeadmControlPlane").GroupKind() {
			if _, err := merge(kcp, cpObject); err != nil {
				return out, err
			}
		} else if xr, changed, err := patched(o.ControlPlanes[cl.Name], cpObject); err != nil {
			return out, err
		} else if changed {
			out.xrs = append(out.xrs, xr)
		}
	}

	// The MachineDeployments: each template is rotated when its spec
	// changes, which changes the MachineDeployment's reference to it.
	for name, d := range desired.MachineDeployments {
		current := s.Current.MachineDeployments[name]
		prev := previous.MachineDeployments[name]
		if prev == nil {
			prev = &scope.MachineDeploymentState{}
		}
		if current != nil {
			if rotates(current.InfrastructureMachineTemplate, dropped(d.InfrastructureMachineTemplate, prev.InfrastructureMachineTemplate)) {
				d.Object.Spec.Template.Spec.InfrastructureRef.Name = newTemplateName(cl.Name, name)
				out.templates = append(out.templates, renamed(d.InfrastructureMachineTemplate, d.Object.Spec.Template.Spec.InfrastructureRef.Name))
			}
			if rotates(current.BootstrapTemplate, dropped(d.BootstrapTemplate, prev.BootstrapTemplate)) {
				d.Object.Spec.Template.Spec.Bootstrap.ConfigRef.Name = newTemplateName(cl.Name, name)
				out.templates = append(out.templates, renamed(d.BootstrapTemplate, d.Object.Spec.Template.Spec.Bootstrap.ConfigRef.Name))
			}
		}
		proposed, err := droppedObject(d.Object, prev.Object)
		if err != nil {
			return out, err
		}
		live, ok := mds[d.Object.Name]
		if !ok || current == nil {
			// A new MachineDeployment: its Machines are created.
			live = &clusterv1.MachineDeployment{}
			live.SetNamespace(cl.Namespace)
			live.SetName(d.Object.Name)
			live.Spec.ClusterName = cl.Name
			mds[d.Object.Name] = live
		}
		if _, err := merge(live, proposed); err != nil {
			return out, err
		}
	}
	// The MachinePools: the MachinePool and its infrastructure XR are
	// patched in place.
	for name, d := range desired.MachinePools {
		current := s.Current.MachinePools[name]
		prev := previous.MachinePools[name]
		if prev == nil {
			prev = &scope.MachinePoolState{}
		}
		if current == nil {
			out.unknown = append(out.unknown, fmt.Sprintf("MachinePool topology %s is created: what its infrastructure composes is not predicted", name))
			continue
		}
		if xr, changed, err := patched(current.InfrastructureMachinePoolObject, dropped(d.InfrastructureMachinePoolObject, prev.InfrastructureMachinePoolObject)); err != nil {
			return out, err
		} else if changed {
			out.xrs = append(out.xrs, xr)
		}
		proposed, err := droppedObject(d.Object, prev.Object)
		if err != nil {
			return out, err
		}
		if live, ok := mps[d.Object.Name]; ok {
			if _, err := merge(live, proposed); err != nil {
				return out, err
			}
		}
	}
	// A MachinePool the topology no longer names is deleted with its
	// instances: a scale to none.
	for name, c := range s.Current.MachinePools {
		if _, ok := desired.MachinePools[name]; !ok {
			if mp, ok := mps[c.Object.Name]; ok {
				mp.Spec.Replicas = ptr.To[int32](0)
			}
		}
	}
	// A MachineDeployment the topology no longer names is deleted with its
	// Machines.
	for name, c := range s.Current.MachineDeployments {
		if _, ok := desired.MachineDeployments[name]; !ok {
			if md, ok := mds[c.Object.Name]; ok {
				md.Spec.Replicas = ptr.To[int32](0)
			}
		}
	}
	return out, nil
}

// desiredOf is CAPI's topology controller's desired state of a Cluster, as r
// reads it, with the scope it was computed from; unknown says why it cannot
// be computed.
func desiredOf(ctx context.Context, r client.Client, o *Observed, cl *clusterv1.Cluster,
	mds map[string]*clusterv1.MachineDeployment, mps map[string]*clusterv1.MachinePool) (*scope.Scope, *scope.ClusterState, string, error) {
	s, unknown, err := topologyScope(ctx, r, o, cl, mds, mps)
	if err != nil || unknown != "" {
		return nil, nil, unknown, err
	}
	g, err := desiredstate.NewGenerator(r, noWorkloadClusters{}, nil, cache.New[cache.HookEntry](ctx, 0), cache.New[desiredstate.GenerateUpgradePlanCacheEntry](ctx, 0))
	if err != nil {
		return nil, nil, "", errors.Wrap(err, "cannot make CAPI's topology generator")
	}
	desired, err := g.Generate(ctx, s)
	if err != nil {
		return nil, nil, fmt.Sprintf("CAPI's topology controller cannot compute the Cluster's desired state: %v", err), nil
	}
	return s, desired, "", nil
}

// droppedObject is a typed desired object as unstructured, with what the
// previous one set and it does not as nulls (dropped).
func droppedObject[T runtime.Object](desired, previous T) (*unstructured.Unstructured, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return nil, errors.Wrap(err, "cannot convert the desired object")
	}
	out := &unstructured.Unstructured{Object: u}
	if reflect.ValueOf(previous).IsNil() {
		return out, nil
	}
	p, err := runtime.DefaultUnstructuredConverter.ToUnstructured(previous)
	if err != nil {
		return nil, errors.Wrap(err, "cannot convert the previous desired object")
	}
	return dropped(out, &unstructured.Unstructured{Object: p}), nil
}

// byName are objects by name, copied.
func byName[T any, P interface {
	*T
	client.Object
	DeepCopy() *T
}](objs []T) map[string]*T {
	out := make(map[string]*T, len(objs))
	for i := range objs {
		out[P(&objs[i]).GetName()] = P(&objs[i]).DeepCopy()
	}
	return out
}

// topologyScope reads what CAPI's topology controller reads of a Cluster:
// its class and the class's templates (the blueprint), and the objects the
// topology owns (the current state). unknown says why it cannot, for a
// class plan cannot compute without calling out.
func topologyScope(ctx context.Context, r client.Client, o *Observed, cl *clusterv1.Cluster,
	mds map[string]*clusterv1.MachineDeployment, mps map[string]*clusterv1.MachinePool) (*scope.Scope, string, error) {
	class := &clusterv1.ClusterClass{}
	ns := cl.Spec.Topology.ClassRef.Namespace
	if ns == "" {
		ns = cl.Namespace
	}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: cl.Spec.Topology.ClassRef.Name}, class); err != nil {
		return nil, "", errors.Wrapf(err, "cannot get ClusterClass %s/%s of Cluster %s", ns, cl.Spec.Topology.ClassRef.Name, cl.Name)
	}
	for _, p := range class.Spec.Patches {
		if p.External != nil {
			return nil, fmt.Sprintf("ClusterClass %s patches through a runtime extension (%s): plan does not call extensions", class.Name, p.Name), nil
		}
	}
	if class.Spec.Upgrade.External.GenerateUpgradePlanExtension != "" {
		return nil, fmt.Sprintf("ClusterClass %s plans upgrades through a runtime extension: plan does not call extensions", class.Name), nil
	}
	get := func(ref clusterv1.ClusterClassTemplateReference) (*unstructured.Unstructured, error) {
		return getObject(ctx, r, ref.GroupVersionKind(), class.Namespace, ref.Name)
	}
	// getPair reads a worker class's infrastructure and bootstrap templates.
	getPair := func(infra, bootstrap clusterv1.ClusterClassTemplateReference) (*unstructured.Unstructured, *unstructured.Unstructured, error) {
		i, err := get(infra)
		if err != nil {
			return nil, nil, err
		}
		b, err := get(bootstrap)
		return i, b, err
	}
	s := scope.New(cl)
	bp := s.Blueprint
	bp.Topology, bp.ClusterClass = cl.Spec.Topology, class
	bp.MachineDeployments, bp.MachinePools = map[string]*scope.MachineDeploymentBlueprint{}, map[string]*scope.MachinePoolBlueprint{}
	var err error
	if bp.InfrastructureClusterTemplate, err = get(class.Spec.Infrastructure.TemplateRef); err != nil {
		return nil, "", err
	}
	bp.ControlPlane = &scope.ControlPlaneBlueprint{}
	if bp.ControlPlane.Template, err = get(class.Spec.ControlPlane.TemplateRef); err != nil {
		return nil, "", err
	}
	if bp.HasControlPlaneInfrastructureMachine() {
		if bp.ControlPlane.InfrastructureMachineTemplate, err = get(class.Spec.ControlPlane.MachineInfrastructure.TemplateRef); err != nil {
			return nil, "", err
		}
	}
	if bp.HasControlPlaneMachineHealthCheck() {
		bp.ControlPlane.HealthCheck = class.Spec.ControlPlane.HealthCheck
	}
	for i := range class.Spec.Workers.MachineDeployments {
		mdc := &class.Spec.Workers.MachineDeployments[i]
		b := &scope.MachineDeploymentBlueprint{HealthCheck: mdc.HealthCheck}
		mdc.Metadata.DeepCopyInto(&b.Metadata)
		if b.InfrastructureMachineTemplate, b.BootstrapTemplate, err = getPair(mdc.Infrastructure.TemplateRef, mdc.Bootstrap.TemplateRef); err != nil {
			return nil, "", err
		}
		bp.MachineDeployments[mdc.Class] = b
	}
	for i := range class.Spec.Workers.MachinePools {
		mpc := &class.Spec.Workers.MachinePools[i]
		b := &scope.MachinePoolBlueprint{}
		mpc.Metadata.DeepCopyInto(&b.Metadata)
		if b.InfrastructureMachinePoolTemplate, b.BootstrapTemplate, err = getPair(mpc.Infrastructure.TemplateRef, mpc.Bootstrap.TemplateRef); err != nil {
			return nil, "", err
		}
		bp.MachinePools[mpc.Class] = b
	}

	// The current state: what the topology owns, as it is.
	cur := s.Current
	cur.InfrastructureCluster = o.InfraClusters[cl.Name]
	cur.ControlPlane = &scope.ControlPlaneState{}
	if ref := cl.Spec.ControlPlaneRef; ref.IsDefined() {
		cp, err := getObject(ctx, r, schema.GroupVersionKind{Group: ref.APIGroup, Kind: ref.Kind}, cl.Namespace, ref.Name)
		if err != nil {
			return nil, "", err
		}
		cur.ControlPlane.Object = cp
		if name, ok, _ := unstructured.NestedString(cp.Object, "spec", "machineTemplate", "spec", "infrastructureRef", "name"); ok && bp.HasControlPlaneInfrastructureMachine() {
			kind, _, _ := unstructured.NestedString(cp.Object, "spec", "machineTemplate", "spec", "infrastructureRef", "kind")
			group, _, _ := unstructured.NestedString(cp.Object, "spec", "machineTemplate", "spec", "infrastructureRef", "apiGroup")
			if cur.ControlPlane.InfrastructureMachineTemplate, err = getObject(ctx, r, schema.GroupVersionKind{Group: group, Kind: kind}, cl.Namespace, name); err != nil {
				return nil, "", err
			}
		}
	}
	cur.MachineDeployments = scope.MachineDeploymentsStateMap{}
	for _, md := range sortedValues(mds) {
		topologyName, owned := md.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel]
		if md.Spec.ClusterName != cl.Name || !owned {
			continue
		}
		st := &scope.MachineDeploymentState{Object: md.DeepCopy()}
		ref := md.Spec.Template.Spec.InfrastructureRef
		if st.InfrastructureMachineTemplate, err = getObject(ctx, r, schema.GroupVersionKind{Group: ref.APIGroup, Kind: ref.Kind}, md.Namespace, ref.Name); err != nil {
			return nil, "", err
		}
		if ref := md.Spec.Template.Spec.Bootstrap.ConfigRef; ref.IsDefined() {
			if st.BootstrapTemplate, err = getObject(ctx, r, schema.GroupVersionKind{Group: ref.APIGroup, Kind: ref.Kind}, md.Namespace, ref.Name); err != nil {
				return nil, "", err
			}
		}
		cur.MachineDeployments[topologyName] = st
	}
	cur.MachinePools = scope.MachinePoolsStateMap{}
	for _, mp := range sortedValues(mps) {
		topologyName, owned := mp.Labels[clusterv1.ClusterTopologyMachinePoolNameLabel]
		if mp.Spec.ClusterName != cl.Name || !owned {
			continue
		}
		// The generator asks a workload cluster whether a pool with Nodes
		// is upgrading; plan reads no workload cluster, and plans a pool's
		// version as if none were (docs/plan.md).
		st := &scope.MachinePoolState{Object: mp.DeepCopy()}
		st.Object.Status.NodeRefs = nil
		st.InfrastructureMachinePoolObject = o.InfraMachinePools[mp.Name]
		if ref := mp.Spec.Template.Spec.Bootstrap.ConfigRef; ref.IsDefined() {
			if st.BootstrapObject, err = getObject(ctx, r, schema.GroupVersionKind{Group: ref.APIGroup, Kind: ref.Kind}, mp.Namespace, ref.Name); err != nil {
				return nil, "", err
			}
		}
		cur.MachinePools[topologyName] = st
	}
	return s, "", nil
}

// newTemplateName stands for the name CAPI generates for a rotated
// template: the cluster's name and the MachineDeployment topology's (none
// for the control plane's), then "(new)" where CAPI puts a random suffix.
// The slash keeps two clusters' names apart (a-b/md and a/b-md), and names
// no object that can exist.
func newTemplateName(cluster, topology string) string {
	return cluster + "/" + topology + "-(new)"
}

// renamed is a copy of a template under another name.
func renamed(u *unstructured.Unstructured, name string) *unstructured.Unstructured {
	out := u.DeepCopy()
	out.SetName(name)
	return out
}

// getObject reads one object of a kind by name, at the version the API
// server prefers when gvk names none.
func getObject(ctx context.Context, r client.Client, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	if gvk.Version == "" {
		m, err := r.RESTMapper().RESTMapping(gvk.GroupKind())
		if err != nil {
			return nil, errors.Wrapf(err, "cannot find the kind %s", gvk.GroupKind())
		}
		gvk = m.GroupVersionKind
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return nil, errors.Wrapf(err, "cannot get %s %s/%s", gvk.Kind, ns, name)
	}
	return u, nil
}

// patched is live with what the topology controller applies of desired
// (its labels, annotations and spec) merged onto it, and whether that
// changes it. A live object that is missing is not patched.
func patched(live, desired *unstructured.Unstructured) (*unstructured.Unstructured, bool, error) {
	if live == nil || desired == nil {
		return nil, false, nil
	}
	u := live.DeepCopy()
	apply := &unstructured.Unstructured{Object: map[string]any{}}
	if spec, ok := desired.Object["spec"]; ok {
		apply.Object["spec"] = spec
	}
	// Copied as they are: a null (a label the topology no longer sets)
	// removes one.
	if m, ok := desired.Object[fieldMetadata].(map[string]any); ok {
		meta := map[string]any{}
		for _, k := range []string{fieldLabels, fieldAnnotations} {
			if v, ok := m[k]; ok {
				meta[k] = v
			}
		}
		apply.Object[fieldMetadata] = meta
	}
	if _, err := merge(u, apply); err != nil {
		return nil, false, err
	}
	return u, len(changedFields(live.Object, u.Object, nil)) > 0 || len(changedFields(u.Object, live.Object, nil)) > 0, nil
}

// dropped is desired with a null at each field previous set and desired no
// longer does (under spec, labels and annotations): what CAPI's topology
// controller last applied and now leaves out, which its server-side apply
// removes, as a merge of dropped removes it. previous is the desired state
// of the objects as they are, before the change.
func dropped(desired, previous *unstructured.Unstructured) *unstructured.Unstructured {
	if desired == nil || previous == nil {
		return desired
	}
	out := desired.DeepCopy()
	nullify(out.Object, previous.Object, nil)
	return out
}

// nullify sets to nil, in desired, each field of previous it lacks, below
// spec, metadata.labels and metadata.annotations.
func nullify(desired, previous map[string]any, path []string) {
	for k, pv := range previous {
		if !setByApply(path, k) {
			continue
		}
		p := append(slices.Clone(path), k)
		dv, ok := desired[k]
		if !ok {
			if len(p) > 1 || k == fieldSpec {
				desired[k] = nil
			}
			continue
		}
		dm, dIsMap := dv.(map[string]any)
		pm, pIsMap := pv.(map[string]any)
		if dIsMap && pIsMap {
			nullify(dm, pm, p)
		}
	}
}

// rotates reports whether CAPI's topology controller replaces a template
// with a new one: when applying the desired template would change the
// current one's spec (a change of its metadata alone is patched in place).
// Applying sets what the desired template holds and leaves the rest, so the
// spec changes when a field the desired template holds differs.
func rotates(current, desired *unstructured.Unstructured) bool {
	if current == nil || desired == nil {
		return false
	}
	want, _, _ := unstructured.NestedFieldNoCopy(desired.Object, "spec")
	have, _, _ := unstructured.NestedFieldNoCopy(current.Object, "spec")
	return !holds(have, want)
}

// holds reports whether have holds every field of want, at the same value
// (a list whole).
func holds(have, want any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		return reflect.DeepEqual(normalize(have), normalize(want))
	}
	hm, ok := have.(map[string]any)
	if !ok {
		return len(wm) == 0
	}
	for k, w := range wm {
		if !holds(hm[k], w) {
			return false
		}
	}
	return true
}

// normalize makes the numbers of JSON and of Go alike for comparison.
func normalize(v any) any {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int32:
		return float64(x)
	case int64:
		return float64(x)
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = normalize(x[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	}
	return v
}

// proposedCluster is a Cluster as the change leaves it: the proposed object
// when the change holds one, the observed one otherwise.
func proposedCluster(overlay map[schema.GroupKind]map[client.ObjectKey]*unstructured.Unstructured, cl *clusterv1.Cluster) (*clusterv1.Cluster, error) {
	u, ok := overlay[clusterv1.GroupVersion.WithKind("Cluster").GroupKind()][client.ObjectKeyFromObject(cl)]
	if !ok {
		return cl, nil
	}
	out := &clusterv1.Cluster{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, errors.Wrapf(err, "cannot read the proposed Cluster %s", cl.Name)
	}
	return out, nil
}

// noWorkloadClusters is the cluster cache plan gives CAPI's generator: plan
// reads the management cluster only. The generator asks for a workload
// cluster's client only to see whether a machine pool upgrades, which plan
// does not compute (topologyScope).
type noWorkloadClusters struct{ clustercache.ClusterCache }

func (noWorkloadClusters) GetClient(context.Context, client.ObjectKey) (client.Client, error) {
	return nil, apierrors.NewServiceUnavailable("plan reads the management cluster only")
}
