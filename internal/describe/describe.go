// Package describe builds the tree `capxp describe cluster` prints: a CAPI
// Cluster, its control plane, MachineDeployments, MachinePools and Machines
// (as `clusterctl describe cluster` shows them), and below every XR what
// Crossplane composed for it and the credentials it uses, with the grant
// that allows them.
//
// It reads with the caller's identity and never fails on a part of the
// tree: an object that is missing, or that the caller may not read, is a
// node saying so.
package describe

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
)

// Reasons of the nodes the tree adds for what it could not read, and for
// credentials.
const (
	ReasonNotFound   = "NotFound"
	ReasonForbidden  = "Forbidden"
	ReasonReadError  = "ReadError"
	ReasonFound      = "Found"
	ReasonGranted    = "Granted"
	ReasonNotGranted = "NotGranted"
)

// A Node is an object of the tree, with the condition that says most about
// it.
type Node struct {
	// Role says what the object is to its parent, where its kind does not:
	// ClusterInfrastructure, ControlPlane, MachineInfrastructure,
	// BootstrapConfig, Credentials, Composed, Workers.
	Role       string `json:"role,omitempty"`
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Condition is the condition Status, Reason and Message are of.
	Condition string                 `json:"condition,omitempty"`
	Status    metav1.ConditionStatus `json:"status,omitempty"`
	Reason    string                 `json:"reason,omitempty"`
	Message   string                 `json:"message,omitempty"`
	Since     *metav1.Time           `json:"since,omitempty"`
	// ExternalName is a composed resource's crossplane.io/external-name.
	ExternalName string `json:"externalName,omitempty"`
	// Conditions are all of the object's conditions, when asked for.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Plan is what a change will do to the object, where a plan was
	// written onto the tree (capxp plan -o tree).
	Plan     string  `json:"plan,omitempty"`
	Children []*Node `json:"children,omitempty"`
}

// Options say what the tree shows.
type Options struct {
	// ShowConditions lists, comma-separated, the kinds (or kind/name) whose
	// every condition the tree carries; "all" for every object.
	ShowConditions string
	// Echo shows each Machine's bootstrap config too, as clusterctl's
	// --echo does.
	Echo bool
}

// Cluster describes the CAPI Cluster ns/name. It fails only when the
// Cluster itself cannot be read.
func Cluster(ctx context.Context, c client.Client, ns, name string, o Options) (*Node, error) {
	d := &describer{c: c, o: o, ns: ns}
	cluster, err := d.get(ctx, clusterv1.GroupVersion.WithKind("Cluster"), ns, name)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot get Cluster %s/%s", ns, name)
	}
	root := d.node(cluster, "", "Available")
	if ref, ok := d.ref(cluster, "spec", "infrastructureRef"); ok {
		root.Children = append(root.Children, d.object(ctx, "ClusterInfrastructure", ref, ns, cluster))
	}
	machines, err := d.list(ctx, clusterv1.GroupVersion.WithKind("Machine"), ns, name)
	if err != nil {
		root.Children = append(root.Children, d.failed("Machines", "Machine", "", err))
		return root, nil
	}
	if ref, ok := d.ref(cluster, "spec", "controlPlaneRef"); ok {
		cp := d.object(ctx, "ControlPlane", ref, ns, nil)
		cp.Children = append(cp.Children, d.machines(ctx, machines, func(m *unstructured.Unstructured) bool {
			_, ok := m.GetLabels()[clusterv1.MachineControlPlaneLabel]
			return ok
		})...)
		root.Children = append(root.Children, cp)
	}
	workers := &Node{Role: "Workers", Kind: "Workers", Name: "Workers"}
	for _, kind := range []struct{ kind, label string }{
		{"MachineDeployment", clusterv1.MachineDeploymentNameLabel},
		{"MachinePool", clusterv1.MachinePoolNameLabel},
	} {
		owners, err := d.list(ctx, clusterv1.GroupVersion.WithKind(kind.kind), ns, name)
		if err != nil {
			workers.Children = append(workers.Children, d.failed("", kind.kind, "", err))
			continue
		}
		for i := range owners {
			owner := d.node(&owners[i], "", "Available")
			// A pool's machines are its infrastructure's instances, not
			// Machines: its XR is its child, as a Machine's is.
			if ref, ok := d.ref(&owners[i], "spec", "template", "spec", "infrastructureRef"); ok && kind.kind == "MachinePool" {
				owner.Children = append(owner.Children, d.object(ctx, "MachinePoolInfrastructure", ref, ns, &owners[i]))
			}
			owner.Children = append(owner.Children, d.machines(ctx, machines, func(m *unstructured.Unstructured) bool {
				return m.GetLabels()[kind.label] == owners[i].GetName()
			})...)
			workers.Children = append(workers.Children, owner)
		}
	}
	if others := d.machines(ctx, machines, func(m *unstructured.Unstructured) bool {
		l := m.GetLabels()
		_, cp := l[clusterv1.MachineControlPlaneLabel]
		return !cp && l[clusterv1.MachineDeploymentNameLabel] == "" && l[clusterv1.MachinePoolNameLabel] == ""
	}); len(others) > 0 {
		workers.Children = append(workers.Children, &Node{Role: "Other", Kind: "Other", Name: "Other", Children: others})
	}
	if len(workers.Children) > 0 {
		root.Children = append(root.Children, workers)
	}
	return root, nil
}

type describer struct {
	c  client.Client
	o  Options
	ns string
}

// get reads an object of a kind whose version the API server chooses when
// gvk has none.
func (d *describer) get(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	if gvk.Version == "" {
		m, err := d.c.RESTMapper().RESTMapping(gvk.GroupKind())
		if err != nil {
			return nil, err
		}
		gvk = m.GroupVersionKind
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, d.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
}

// list lists a CAPI kind's objects of a cluster, by name.
func (d *describer) list(ctx context.Context, gvk schema.GroupVersionKind, ns, cluster string) ([]unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := d.c.List(ctx, l, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		return nil, err
	}
	slices.SortFunc(l.Items, func(a, b unstructured.Unstructured) int { return cmp.Compare(a.GetName(), b.GetName()) })
	return l.Items, nil
}

// A reference is CAPI's reference to an object of its namespace.
type reference struct {
	group, kind, name string
}

// ref reads a CAPI reference (apiGroup, kind, name) at path.
func (d *describer) ref(u *unstructured.Unstructured, path ...string) (reference, bool) {
	m, _, _ := unstructured.NestedStringMap(u.Object, path...)
	r := reference{group: m["apiGroup"], kind: m["kind"], name: m["name"]}
	return r, r.kind != "" && r.name != ""
}

// object is the node of the object a reference names; owner is the CAPI
// object whose CrossplaneInfrastructureReady condition carries the
// bridge's verdict on it, if it is an XR.
func (d *describer) object(ctx context.Context, role string, ref reference, ns string, owner *unstructured.Unstructured) *Node {
	u, err := d.get(ctx, schema.GroupVersionKind{Group: ref.group, Kind: ref.kind}, ns, ref.name)
	if err != nil {
		return d.failed(role, ref.kind, ref.name, err)
	}
	if isXR(u) {
		return d.xr(ctx, role, u, owner)
	}
	return d.node(u, role, "Available", "Ready")
}

// machines are the nodes of the machines that match, each with its XR and,
// with Echo, its bootstrap config.
func (d *describer) machines(ctx context.Context, all []unstructured.Unstructured, match func(*unstructured.Unstructured) bool) []*Node {
	var out []*Node
	for i := range all {
		m := &all[i]
		if !match(m) {
			continue
		}
		n := d.node(m, "", "Ready")
		if ref, ok := d.ref(m, "spec", "infrastructureRef"); ok {
			n.Children = append(n.Children, d.object(ctx, "MachineInfrastructure", ref, m.GetNamespace(), m))
		}
		if ref, ok := d.ref(m, "spec", "bootstrap", "configRef"); ok && d.o.Echo {
			n.Children = append(n.Children, d.object(ctx, "BootstrapConfig", ref, m.GetNamespace(), nil))
		}
		out = append(out, n)
	}
	return out
}

// isXR reports whether an object is a Crossplane composite resource.
func isXR(u *unstructured.Unstructured) bool {
	_, ok, _ := unstructured.NestedMap(u.Object, "spec", "crossplane")
	return ok
}

// xr is an XR's node: its status the first of these that is not True: the
// bridge's verdict (owner's CrossplaneInfrastructureReady), Crossplane's
// Synced, Ready and Responsive; below it its credentials and what it
// composed.
func (d *describer) xr(ctx context.Context, role string, u *unstructured.Unstructured, owner *unstructured.Unstructured) *Node {
	n := d.node(u, role, "Ready")
	conds := conditions(u)
	if owner != nil {
		if v := find(conditions(owner), infrav1.CrossplaneInfrastructureReadyCondition); v != nil && v.Status != metav1.ConditionTrue {
			conds = append([]metav1.Condition{*v}, conds...)
		}
	}
	for _, t := range []string{infrav1.CrossplaneInfrastructureReadyCondition, "Synced", "Ready", "Responsive"} {
		if c := find(conds, t); c != nil && c.Status != metav1.ConditionTrue {
			n.setCondition(c)
			break
		}
	}
	if c := d.credentials(ctx, u); c != nil {
		n.Children = append(n.Children, c)
	}
	refs, _, _ := unstructured.NestedSlice(u.Object, "spec", "crossplane", "resourceRefs")
	for _, r := range refs {
		m, _ := r.(map[string]any)
		apiVersion, _ := m["apiVersion"].(string)
		kind, _ := m["kind"].(string)
		name, _ := m["name"].(string)
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil || kind == "" || name == "" {
			continue
		}
		composed, err := d.get(ctx, gv.WithKind(kind), u.GetNamespace(), name)
		if err != nil {
			n.Children = append(n.Children, d.failed("Composed", kind, name, err))
			continue
		}
		c := d.node(composed, "Composed", "Ready")
		if s := find(conditions(composed), "Synced"); s != nil && s.Status != metav1.ConditionTrue {
			c.setCondition(s)
		}
		c.ExternalName = composed.GetAnnotations()["crossplane.io/external-name"]
		n.Children = append(n.Children, c)
	}
	return n
}

// credentials is the node of the credentials an XR's spec.providerConfigRef
// names: found, and for a ClusterProviderConfig the grant that lets the XR's
// namespace use it.
func (d *describer) credentials(ctx context.Context, xr *unstructured.Unstructured) *Node {
	ref, _, _ := unstructured.NestedStringMap(xr.Object, "spec", "providerConfigRef")
	if ref["kind"] == "" || ref["name"] == "" {
		return nil
	}
	ns := xr.GetNamespace()
	if ref["kind"] == string(infrav1.ProviderConfigKindCluster) {
		ns = ""
	}
	cfg, err := d.get(ctx, schema.GroupVersionKind{Group: ref["apiGroup"], Kind: ref["kind"]}, ns, ref["name"])
	if err != nil {
		n := d.failed("Credentials", ref["kind"], ref["name"], err)
		n.Namespace = ns
		return n
	}
	n := d.node(cfg, "Credentials")
	n.Condition, n.Status, n.Reason = "", metav1.ConditionTrue, ReasonFound
	n.Message, n.Since = "", nil
	if ref["kind"] != string(infrav1.ProviderConfigKindCluster) {
		return n
	}
	grant, msg, err := d.granted(ctx, xr.GetNamespace(), credentials.Config(ref["apiGroup"], ref["kind"], ref["name"]))
	switch {
	case err != nil:
		n.Status, n.Reason, n.Message = metav1.ConditionUnknown, reasonOf(err), err.Error()
	case grant == "":
		n.Status, n.Reason, n.Message = metav1.ConditionFalse, ReasonNotGranted, msg
	default:
		n.Reason, n.Message = ReasonGranted, fmt.Sprintf("namespace %s may use it: ClusterProviderConfigGrant %s", xr.GetNamespace(), grant)
	}
	return n
}

// granted names the grant that lets a namespace use shared credentials, or
// says why none does.
func (d *describer) granted(ctx context.Context, namespace string, s credentials.Shared) (string, string, error) {
	ns := &corev1.Namespace{}
	if err := d.c.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return "", "", errors.Wrapf(err, "cannot get namespace %s", namespace)
	}
	grants := &infrav1.ClusterProviderConfigGrantList{}
	if err := d.c.List(ctx, grants); err != nil {
		return "", "", errors.Wrap(err, "cannot list ClusterProviderConfigGrants")
	}
	return credentials.GrantedBy(grants.Items, s, ns)
}

// node is an object's node, its status that of the first of the
// conditions it has.
func (d *describer) node(u *unstructured.Unstructured, role string, condition ...string) *Node {
	n := &Node{Role: role, APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
	conds := conditions(u)
	for _, t := range condition {
		if c := find(conds, t); c != nil {
			n.setCondition(c)
			break
		}
	}
	if d.shows(u) {
		n.Conditions = conds
	}
	return n
}

// shows reports whether every condition of an object is asked for.
func (d *describer) shows(u *unstructured.Unstructured) bool {
	for _, s := range strings.Split(d.o.ShowConditions, ",") {
		kind, name, named := strings.Cut(strings.TrimSpace(s), "/")
		if s == "all" || (strings.EqualFold(kind, u.GetKind()) && (!named || name == u.GetName())) {
			return true
		}
	}
	return false
}

// failed is the node of an object the tree could not read.
func (d *describer) failed(role, kind, name string, err error) *Node {
	return &Node{Role: role, Kind: kind, Name: name, Status: metav1.ConditionUnknown, Reason: reasonOf(err), Message: err.Error()}
}

func reasonOf(err error) string {
	switch {
	case apierrors.IsNotFound(err):
		return ReasonNotFound
	case apierrors.IsForbidden(err):
		return ReasonForbidden
	}
	return ReasonReadError
}

func (n *Node) setCondition(c *metav1.Condition) {
	n.Condition, n.Status, n.Reason = c.Type, c.Status, c.Reason
	n.Message = oneLine(c.Message)
	n.Since = c.LastTransitionTime.DeepCopy()
	if n.Since.IsZero() {
		n.Since = nil
	}
}

// conditions are an object's status.conditions, in CAPI's and Crossplane's
// shared shape.
func conditions(u *unstructured.Unstructured) []metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	out := make([]metav1.Condition, 0, len(raw))
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		c := metav1.Condition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c); err != nil {
			continue
		}
		out = append(out, c)
	}
	return out
}

func find(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
