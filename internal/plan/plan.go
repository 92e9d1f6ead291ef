// Package plan predicts what a proposed change to a management cluster will
// do to its running clusters before it is applied: which Machines CAPI will
// replace and which stay. It decides with CAPI's own rules, linked rather
// than imitated: a MachineDeployment's with mdutil.FindNewAndOldMachineSets
// and MachineTemplateUpToDate, a KubeadmControlPlane's with its
// controller's UpToDate, each given the change applied to what is observed
// now. It never writes: Observe reads, and Predict reads only through the
// reader it is given.
package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	kcpfilters "sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment/mdutil"
	"sigs.k8s.io/cluster-api/util/collections"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/internal/hooks"
)

// Scheme is what plan reads: CAPI's core kinds, the kubeadm control
// plane's and bootstrap's, and CAPI's ExtensionConfig.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(controlplanev1.AddToScheme(s))
	utilruntime.Must(bootstrapv1.AddToScheme(s))
	utilruntime.Must(infrav1.AddToScheme(s))
	utilruntime.Must(runtimev1.AddToScheme(s))
	return s
}

// Verdict is what a change does to one Machine.
type Verdict string

// Verdicts.
const (
	// Replaced: CAPI will delete the Machine and create another in its
	// place (a rollout).
	Replaced Verdict = "Replaced"
	// Kept: the Machine stays; a change to it, if any, is made in place.
	Kept Verdict = "Kept"
	// Outdated: the Machine no longer matches what its owner wants, but
	// its owner replaces it only when someone deletes it (OnDelete).
	Outdated Verdict = "Outdated"
	// UpdatedInPlace: CAPI keeps the Machine and moves it to the new
	// template in place, as CAPXP's in-place update hook answers it.
	UpdatedInPlace Verdict = "UpdatedInPlace"
)

// Machine is the prediction for one Machine.
type Machine struct {
	Name string `json:"name"`
	// Owner is the MachineDeployment or KubeadmControlPlane that rolls it
	// out, Kind/name.
	Owner   string  `json:"owner"`
	Verdict Verdict `json:"verdict"`
	// Reasons are CAPI's own words for why it is not up to date.
	Reasons []string `json:"reasons,omitempty"`
}

// Scale is a change of an owner's replicas: Machines CAPI creates beside
// those it has, or deletes (which ones, CAPI picks then).
type Scale struct {
	Owner string `json:"owner"`
	From  int32  `json:"from"`
	To    int32  `json:"to"`
}

// Cluster is the prediction for one CAPI Cluster.
type Cluster struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Machines  []Machine `json:"machines"`
	Scales    []Scale   `json:"scales,omitempty"`
	// Unknown says what plan cannot know about this cluster.
	Unknown []string `json:"unknown,omitempty"`
}

// Change is one object of the proposed change.
type Change struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Action is created (it does not exist), updated or unchanged.
	Action string `json:"action"`
}

// Plan is what a change will do.
type Plan struct {
	Changes  []Change  `json:"changes"`
	Clusters []Cluster `json:"clusters"`
	// XRs are the composite resources the change reaches, and what
	// Crossplane will do to what they compose.
	XRs []XR `json:"xrs,omitempty"`
	// Unknown says what plan cannot know of the change as a whole.
	Unknown []string `json:"unknown,omitempty"`
}

// Replaces reports whether the change replaces or deletes any Machine or
// composed resource (or may: a Machine predicted updated in place is
// replaced where CAPI's InPlaceUpdates feature is off), or has one refused
// for its credentials.
func (p *Plan) Replaces() bool {
	for _, c := range p.Clusters {
		for _, m := range c.Machines {
			// UpdatedInPlace too: plan cannot read CAPI's InPlaceUpdates
			// feature gate, and with it off CAPI replaces the Machine.
			if m.Verdict == Replaced || m.Verdict == UpdatedInPlace {
				return true
			}
		}
		for _, s := range c.Scales {
			if s.To < s.From {
				return true
			}
		}
	}
	for i := range p.XRs {
		x := &p.XRs[i]
		if x.Held != "" {
			return true
		}
		for _, ch := range x.Changes {
			if ch.Action == Deleted || ch.Refused != "" {
				return true
			}
		}
	}
	return false
}

// Observed is what plan reads of a namespace: the objects CAPI's rollout
// rules decide on.
type Observed struct {
	Clusters             []clusterv1.Cluster
	MachineDeployments   []clusterv1.MachineDeployment
	MachineSets          []clusterv1.MachineSet
	Machines             []clusterv1.Machine
	KubeadmControlPlanes []controlplanev1.KubeadmControlPlane
	KubeadmConfigs       []bootstrapv1.KubeadmConfig
	MachinePools         []clusterv1.MachinePool
	// InfraMachines are the Machines' infrastructure objects (XRs), by the
	// name of their Machine; InfraClusters the Clusters' and ControlPlanes
	// their control planes that are XRs, by the Cluster's name;
	// InfraMachinePools the MachinePools', by the MachinePool's name.
	InfraMachines, InfraClusters, ControlPlanes, InfraMachinePools map[string]*unstructured.Unstructured
	// InPlace is whether CAPI asks CAPXP's hooks before it replaces a
	// MachineDeployment's Machines.
	InPlace InPlace
}

// Observe reads a namespace as plan needs it. A list it may not read is an
// error that names it.
func Observe(ctx context.Context, c client.Client, ns string) (*Observed, error) {
	o := &Observed{
		InfraMachines:     map[string]*unstructured.Unstructured{},
		InfraClusters:     map[string]*unstructured.Unstructured{},
		ControlPlanes:     map[string]*unstructured.Unstructured{},
		InfraMachinePools: map[string]*unstructured.Unstructured{},
	}
	var (
		clusters clusterv1.ClusterList
		mds      clusterv1.MachineDeploymentList
		mss      clusterv1.MachineSetList
		ms       clusterv1.MachineList
		kcps     controlplanev1.KubeadmControlPlaneList
		kcs      bootstrapv1.KubeadmConfigList
		mps      clusterv1.MachinePoolList
	)
	for _, l := range []struct {
		what string
		list client.ObjectList
	}{
		{"Clusters", &clusters}, {"MachineDeployments", &mds}, {"MachineSets", &mss}, {"Machines", &ms},
		{"KubeadmControlPlanes", &kcps}, {"KubeadmConfigs", &kcs}, {"MachinePools", &mps},
	} {
		if err := c.List(ctx, l.list, client.InNamespace(ns)); err != nil {
			return nil, errors.Wrapf(err, "cannot list the %s of namespace %s", l.what, ns)
		}
	}
	o.Clusters, o.MachineDeployments, o.MachineSets, o.Machines = clusters.Items, mds.Items, mss.Items, ms.Items
	o.KubeadmControlPlanes, o.KubeadmConfigs, o.MachinePools = kcps.Items, kcs.Items, mps.Items
	o.InPlace = ObserveInPlace(ctx, c)
	r := &refReader{c: c, ns: ns, kinds: map[schema.GroupKind]*refKind{}}
	for i := range o.Machines {
		m := &o.Machines[i]
		if err := r.get(ctx, m.Spec.InfrastructureRef, o.InfraMachines, m.Name); err != nil {
			return nil, errors.Wrapf(err, "Machine %s", m.Name)
		}
	}
	for i := range o.MachinePools {
		mp := &o.MachinePools[i]
		if err := r.get(ctx, mp.Spec.Template.Spec.InfrastructureRef, o.InfraMachinePools, mp.Name); err != nil {
			return nil, errors.Wrapf(err, "MachinePool %s", mp.Name)
		}
	}
	for i := range o.Clusters {
		cl := &o.Clusters[i]
		if err := r.get(ctx, cl.Spec.InfrastructureRef, o.InfraClusters, cl.Name); err != nil {
			return nil, errors.Wrapf(err, "Cluster %s", cl.Name)
		}
		if ref := cl.Spec.ControlPlaneRef; ref.IsDefined() && ref.APIGroup != controlplanev1.GroupVersion.Group {
			if err := r.get(ctx, ref, o.ControlPlanes, cl.Name); err != nil {
				return nil, errors.Wrapf(err, "Cluster %s", cl.Name)
			}
		}
	}
	return o, nil
}

// refReader reads the objects references name in one namespace, listing
// each kind once: a hundred Machines' XRs are one request, not a hundred. A
// kind the reader may get but not list is read by name.
type refReader struct {
	c     client.Client
	ns    string
	kinds map[schema.GroupKind]*refKind
}

// refKind is one kind's served version and, once listed, its objects by
// name (nil when it may not be listed).
type refKind struct {
	apiVersion string
	byName     map[string]*unstructured.Unstructured
}

// get reads the object a reference names into into[key]; one that is
// gone is left out.
func (r *refReader) get(ctx context.Context, ref clusterv1.ContractVersionedObjectReference, into map[string]*unstructured.Unstructured, key string) error {
	if !ref.IsDefined() {
		return nil
	}
	k, err := r.kind(ctx, schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind})
	if err != nil {
		return err
	}
	if k.byName != nil {
		if u, ok := k.byName[ref.Name]; ok {
			into[key] = u
		}
		return nil
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(k.apiVersion)
	u.SetKind(ref.Kind)
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: ref.Name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errors.Wrapf(err, "cannot get %s %s/%s", ref.Kind, r.ns, ref.Name)
	}
	into[key] = u
	return nil
}

// kind finds a kind's served version and lists it, once.
func (r *refReader) kind(ctx context.Context, gk schema.GroupKind) (*refKind, error) {
	if k, ok := r.kinds[gk]; ok {
		return k, nil
	}
	gv, err := groupVersion(r.c, gk.Group, gk.Kind)
	if err != nil {
		return nil, err
	}
	k := &refKind{apiVersion: gv}
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(gv)
	l.SetKind(gk.Kind + "List")
	switch err := r.c.List(ctx, l, client.InNamespace(r.ns)); {
	case err == nil:
		k.byName = make(map[string]*unstructured.Unstructured, len(l.Items))
		for i := range l.Items {
			k.byName[l.Items[i].GetName()] = &l.Items[i]
		}
	case !apierrors.IsForbidden(err):
		return nil, errors.Wrapf(err, "cannot list the %s of namespace %s", gk.Kind, r.ns)
	}
	r.kinds[gk] = k
	return k, nil
}

// ReadCredentials reads a namespace's NamespaceCredentials for judging
// composed resources; what it cannot read is said on each resource.
func ReadCredentials(ctx context.Context, c client.Reader, ns string, providers []credentials.Provider) *Credentials {
	rec := &infrav1.NamespaceCredentials{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: infrav1.NamespaceCredentialsName}, rec)
	if err != nil {
		return &Credentials{Providers: providers, Unread: errors.Wrapf(err, "cannot read NamespaceCredentials %s/%s", ns, infrav1.NamespaceCredentialsName)}
	}
	return &Credentials{Providers: providers, Record: &rec.Spec}
}

// groupVersion is the preferred version of a kind, from the client's REST
// mapper.
func groupVersion(c client.Client, group, kind string) (string, error) {
	m, err := c.RESTMapper().RESTMapping(schema.GroupKind{Group: group, Kind: kind})
	if err != nil {
		return "", errors.Wrapf(err, "cannot find the served version of %s.%s", kind, group)
	}
	return m.GroupVersionKind.GroupVersion().String(), nil
}

// Predict says what applying proposed (the objects of a change, as a user
// would apply them) does to the clusters of observed, at now. Each proposed
// object is merged onto the live one it names (RFC 7386: the fields it sets
// replace the live ones, lists whole), as `kubectl apply` of a file that
// sets them does. r reads what CAPI's rules read besides (a control
// plane's infrastructure template); Predict gives it the proposed objects
// first.
//
// With a Renderer, the XRs the change reaches (an XR it edits, those that
// use a Composition it changes, those of the Machines it replaces) are
// rendered with Crossplane's pipeline against what they composed; without
// one, each says it was not rendered.
func Predict(ctx context.Context, r client.Client, rd Renderer, creds *Credentials, observed *Observed, proposed []*unstructured.Unstructured, now metav1.Time) (*Plan, error) {
	p := &Plan{}
	mds := map[string]*clusterv1.MachineDeployment{}
	for i := range observed.MachineDeployments {
		md := &observed.MachineDeployments[i]
		mds[md.Name] = md.DeepCopy()
	}
	kcps := map[string]*controlplanev1.KubeadmControlPlane{}
	for i := range observed.KubeadmControlPlanes {
		kcp := &observed.KubeadmControlPlanes[i]
		kcps[kcp.Name] = kcp.DeepCopy()
	}
	mps := map[string]*clusterv1.MachinePool{}
	for i := range observed.MachinePools {
		mp := &observed.MachinePools[i]
		mps[mp.Name] = mp.DeepCopy()
	}
	overlay := map[schema.GroupKind]map[client.ObjectKey]*unstructured.Unstructured{}
	reader := proposedFirst{Client: r, proposed: overlay}
	var merged []*unstructured.Unstructured
	for _, u := range proposed {
		gk := u.GroupVersionKind().GroupKind()
		key := client.ObjectKeyFromObject(u)
		ch := Change{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Action: "created"}
		var err error
		switch gk {
		case clusterv1.GroupVersion.WithKind("MachineDeployment").GroupKind():
			ch.Action, err = mergeNamed(mds, u)
		case controlplanev1.GroupVersion.WithKind("KubeadmControlPlane").GroupKind():
			ch.Action, err = mergeNamed(kcps, u)
		case clusterv1.GroupVersion.WithKind("MachinePool").GroupKind():
			ch.Action, err = mergeNamed(mps, u)
		default:
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(u.GroupVersionKind())
			getErr := reader.Get(ctx, key, live)
			switch {
			case apierrors.IsNotFound(getErr):
			case getErr != nil:
				return nil, errors.Wrapf(getErr, "cannot get %s %s", u.GetKind(), key)
			default:
				var changed bool
				if changed, err = merge(live, u); err == nil {
					ch.Action = action(changed)
					u = live
				}
			}
			merged = append(merged, u)
		}
		if err != nil {
			return nil, err
		}
		if overlay[gk] == nil {
			overlay[gk] = map[client.ObjectKey]*unstructured.Unstructured{}
		}
		overlay[gk][key] = u
		p.Changes = append(p.Changes, ch)
	}
	// What CAPI's topology controller writes of each Cluster with a managed
	// topology, as the change leaves the Cluster and its class.
	topologyUnknown := map[string][]string{}
	for i := range observed.Clusters {
		cl, err := proposedCluster(overlay, &observed.Clusters[i])
		if err != nil {
			return nil, err
		}
		if !cl.Spec.Topology.IsDefined() {
			continue
		}
		tc, err := predictTopology(ctx, reader, r, asProposed(observed, overlay), observed, cl, &observed.Clusters[i], mds, kcps, mps)
		if err != nil {
			return nil, errors.Wrapf(err, "Cluster %s", cl.Name)
		}
		topologyUnknown[cl.Name] = tc.unknown
		for _, u := range append(slices.Clone(tc.xrs), tc.templates...) {
			gk, key := u.GroupVersionKind().GroupKind(), client.ObjectKeyFromObject(u)
			if overlay[gk] == nil {
				overlay[gk] = map[client.ObjectKey]*unstructured.Unstructured{}
			}
			overlay[gk][key] = u
		}
		for _, xr := range tc.xrs {
			merged = replaceIn(merged, xr)
		}
	}
	var rule *inPlaceRule
	if observed.InPlace.Discovered {
		rule = &inPlaceRule{hook: hooks.NewExtension(reader, reader, r.RESTMapper()), reader: reader}
	}
	if observed.InPlace.Unread != "" {
		p.Unknown = append(p.Unknown, observed.InPlace.Unread)
	}
	for i := range observed.Clusters {
		cl := &observed.Clusters[i]
		c := Cluster{Namespace: cl.Namespace, Name: cl.Name, Unknown: topologyUnknown[cl.Name]}
		for _, md := range sortedValues(mds) {
			if md.Spec.ClusterName != cl.Name {
				continue
			}
			machines, scale, err := predictMachineDeployment(ctx, rule, observed, md, now)
			if err != nil {
				return nil, err
			}
			c.Machines = append(c.Machines, machines...)
			if scale != nil {
				c.Scales = append(c.Scales, *scale)
			}
		}
		for _, kcp := range sortedValues(kcps) {
			if cl.Spec.ControlPlaneRef.Name != kcp.Name || cl.Spec.ControlPlaneRef.Kind != "KubeadmControlPlane" {
				continue
			}
			machines, scale, err := predictControlPlane(ctx, reader, observed, cl, kcp, now)
			if err != nil {
				return nil, err
			}
			c.Machines = append(c.Machines, machines...)
			if scale != nil {
				c.Scales = append(c.Scales, *scale)
			}
		}
		for _, mp := range sortedValues(mps) {
			if mp.Spec.ClusterName != cl.Name {
				continue
			}
			live := mp
			if i := slices.IndexFunc(observed.MachinePools, func(o clusterv1.MachinePool) bool { return o.Name == mp.Name }); i >= 0 {
				live = &observed.MachinePools[i]
			}
			scale, xr, unknown, err := predictPool(cl, live, mp, proposedXR(overlay, observed.InfraClusters[cl.Name]), proposedXR(overlay, observed.InfraMachinePools[mp.Name]))
			if err != nil {
				return nil, err
			}
			if unknown != "" {
				c.Unknown = append(c.Unknown, unknown)
			}
			if scale != nil {
				c.Scales = append(c.Scales, *scale)
			}
			if xr != nil {
				merged = replaceIn(merged, xr)
			}
		}
		c.Unknown = append(c.Unknown, unpredicted(observed, cl.Name, c.Machines)...)
		sort.Slice(c.Machines, func(i, j int) bool { return c.Machines[i].Name < c.Machines[j].Name })
		p.Clusters = append(p.Clusters, c)
	}
	p.Unknown = append(p.Unknown, inPlaceUnknown(p.Clusters)...)
	p.XRs = predictXRs(ctx, reader, rd, creds, observed, merged, p.Clusters)
	return p, nil
}

// replaceIn is objs with u in place of the object of its kind and name.
func replaceIn(objs []*unstructured.Unstructured, u *unstructured.Unstructured) []*unstructured.Unstructured {
	gk, key := u.GroupVersionKind().GroupKind(), client.ObjectKeyFromObject(u)
	objs = slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool {
		return o.GroupVersionKind().GroupKind() == gk && client.ObjectKeyFromObject(o) == key
	})
	return append(objs, u)
}

// asProposed is what plan observed with each XR as the change leaves it.
func asProposed(o *Observed, overlay map[schema.GroupKind]map[client.ObjectKey]*unstructured.Unstructured) *Observed {
	out := *o
	for _, m := range []*map[string]*unstructured.Unstructured{&out.InfraMachines, &out.InfraClusters, &out.ControlPlanes, &out.InfraMachinePools} {
		proposed := make(map[string]*unstructured.Unstructured, len(*m))
		for k, u := range *m {
			proposed[k] = proposedXR(overlay, u)
		}
		*m = proposed
	}
	return &out
}

// proposedXR is an observed object as the change leaves it: the proposed
// one when the change (or what the topology controller writes) holds it.
func proposedXR(overlay map[schema.GroupKind]map[client.ObjectKey]*unstructured.Unstructured, u *unstructured.Unstructured) *unstructured.Unstructured {
	if u == nil {
		return nil
	}
	if p, ok := overlay[u.GroupVersionKind().GroupKind()][client.ObjectKeyFromObject(u)]; ok {
		return p
	}
	return u
}

// predictXRs predicts each XR the change reaches, once: an XR the change
// edits; an XR whose Composition the change edits (one pinned to its
// revision is not moved by it, and says so); a replaced Machine's XR, whose
// resources go with it.
func predictXRs(ctx context.Context, r client.Reader, rd Renderer, creds *Credentials, o *Observed, merged []*unstructured.Unstructured, clusters []Cluster) []XR {
	compositions := map[string]*unstructured.Unstructured{}
	for _, u := range merged {
		if u.GetKind() == "Composition" && u.GroupVersionKind().Group == "apiextensions.crossplane.io" {
			compositions[u.GetName()] = u
		}
	}
	var out []XR
	done := map[string]bool{}
	key := func(u *unstructured.Unstructured) string {
		return u.GroupVersionKind().GroupKind().String() + "/" + u.GetNamespace() + "/" + u.GetName()
	}
	observedXRs := map[string]*unstructured.Unstructured{}
	for _, m := range [...]map[string]*unstructured.Unstructured{o.InfraMachines, o.InfraClusters, o.ControlPlanes, o.InfraMachinePools} {
		for _, u := range m {
			observedXRs[key(u)] = u
		}
	}
	for _, u := range merged {
		if isXR(u) {
			done[key(u)] = true
			x := predictXR(ctx, r, rd, creds, u, compositions)
			if live, ok := observedXRs[key(u)]; ok {
				x.Edited = changedFields(live.Object, u.Object, nil)
			}
			out = append(out, x)
		}
	}
	replaced := map[string]bool{}
	for _, c := range clusters {
		for _, m := range c.Machines {
			if m.Verdict == Replaced {
				replaced[m.Name] = true
			}
		}
	}
	var existing []*unstructured.Unstructured
	for _, m := range sortedKeys(o.InfraMachines) {
		xr := o.InfraMachines[m]
		if !isXR(xr) || done[key(xr)] {
			continue
		}
		if replaced[m] {
			done[key(xr)] = true
			out = append(out, goesWith(ctx, r, xr, m))
			continue
		}
		existing = append(existing, xr)
	}
	for _, m := range [...]map[string]*unstructured.Unstructured{o.InfraClusters, o.ControlPlanes, o.InfraMachinePools} {
		for _, k := range sortedKeys(m) {
			if isXR(m[k]) {
				existing = append(existing, m[k])
			}
		}
	}
	for _, xr := range existing {
		name, _, _ := unstructured.NestedString(xr.Object, "spec", "crossplane", "compositionRef", "name")
		if _, ok := compositions[name]; !ok || done[key(xr)] {
			continue
		}
		done[key(xr)] = true
		if pinned(xr) {
			rev, _, _ := unstructured.NestedString(xr.Object, "spec", "crossplane", "compositionRevisionRef", "name")
			out = append(out, XR{Kind: xr.GetKind(), Namespace: xr.GetNamespace(), Name: xr.GetName(), Composition: name,
				Unknown: []string{fmt.Sprintf("pinned to CompositionRevision %s (compositionUpdatePolicy Manual): the change reaches it when CAPI replaces its Machine", rev)}})
			continue
		}
		out = append(out, predictXR(ctx, r, rd, creds, xr, compositions))
	}
	return out
}

// goesWith is a replaced Machine's XR: everything it composed is deleted
// with it; its replacement composes anew.
func goesWith(ctx context.Context, r client.Reader, xr *unstructured.Unstructured, machine string) XR {
	name, _, _ := unstructured.NestedString(xr.Object, "spec", "crossplane", "compositionRef", "name")
	out := XR{Kind: xr.GetKind(), Namespace: xr.GetNamespace(), Name: xr.GetName(), Composition: name}
	composed, unknown := composedOf(ctx, r, xr)
	out.Unknown = append(out.Unknown, unknown...)
	out.Unknown = append(out.Unknown, fmt.Sprintf("what the replacement of Machine %s composes (with the Composition its template selects); this XR goes with the Machine", machine))
	for _, c := range composed {
		out.Changes = append(out.Changes, ComposedChange{Resource: c.GetAnnotations()[annotationResourceName], Kind: c.GetKind(), Name: c.GetName(), Action: Deleted})
	}
	return out
}

// sortedKeys are a map's keys, sorted.
func sortedKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func action(changed bool) string {
	if changed {
		return "updated"
	}
	return "unchanged"
}

// mergeNamed merges a proposed object onto the live one of its name in
// objs, when there is one, and says what the change does to it: created (no
// live one), updated or unchanged.
func mergeNamed[T runtime.Object](objs map[string]T, u *unstructured.Unstructured) (string, error) {
	live, ok := objs[u.GetName()]
	if !ok {
		return "created", nil
	}
	changed, err := merge(live, u)
	return action(changed), err
}

// merge applies the fields proposed sets onto live (in place) and reports
// whether anything changed.
func merge(live runtime.Object, proposed *unstructured.Unstructured) (bool, error) {
	before, err := json.Marshal(live)
	if err != nil {
		return false, errors.Wrap(err, "cannot encode the live object")
	}
	patch := proposed.DeepCopy()
	// What the API server owns is not the user's to change.
	unstructured.RemoveNestedField(patch.Object, "status")
	// Its identity, which names the live object rather than changing it.
	delete(patch.Object, "apiVersion")
	delete(patch.Object, "kind")
	for _, f := range []string{"resourceVersion", "uid", "generation", "creationTimestamp", "managedFields"} {
		unstructured.RemoveNestedField(patch.Object, "metadata", f)
	}
	raw, err := json.Marshal(patch.Object)
	if err != nil {
		return false, errors.Wrap(err, "cannot encode the proposed object")
	}
	after, err := jsonpatch.MergePatch(before, raw)
	if err != nil {
		return false, errors.Wrapf(err, "cannot apply %s %s onto the live one", proposed.GetKind(), proposed.GetName())
	}
	if jsonpatch.Equal(before, after) {
		return false, nil
	}
	if u, ok := live.(*unstructured.Unstructured); ok {
		u.Object = map[string]any{}
		return true, errors.Wrap(json.Unmarshal(after, &u.Object), "cannot decode the merged object")
	}
	return true, errors.Wrapf(json.Unmarshal(after, live), "cannot decode %s %s with the change", proposed.GetKind(), proposed.GetName())
}

// predictMachineDeployment decides as CAPI's MachineDeployment controller
// does: the MachineSet whose template is up to date with the desired one
// (FindNewAndOldMachineSets, rolloutAfter included) keeps its Machines;
// every other MachineSet's are replaced, or, with OnDelete, outdated, or,
// where CAPI asks CAPXP's in-place update hook (rule) and its answer makes
// the old templates the new, updated in place.
func predictMachineDeployment(ctx context.Context, rule *inPlaceRule, o *Observed, md *clusterv1.MachineDeployment, now metav1.Time) ([]Machine, *Scale, error) {
	owner := "MachineDeployment/" + md.Name
	var sets []*clusterv1.MachineSet
	for i := range o.MachineSets {
		ms := &o.MachineSets[i]
		if metav1.IsControlledBy(ms, md) {
			sets = append(sets, ms)
		}
	}
	newMS, _, results, _ := mdutil.FindNewAndOldMachineSets(md, sets, now)
	var out []Machine
	var current int32
	for _, ms := range sets {
		old := newMS == nil || ms.Name != newMS.Name
		inPlace, answer := false, ""
		if old && slices.ContainsFunc(o.Machines, func(m clusterv1.Machine) bool { return metav1.IsControlledBy(&m, ms) }) {
			var err error
			if inPlace, answer, err = rule.updatesInPlace(ctx, md, ms, newMS, results[ms.Name]); err != nil {
				return nil, nil, errors.Wrapf(err, "MachineDeployment %s", md.Name)
			}
		}
		for i := range o.Machines {
			m := &o.Machines[i]
			if !metav1.IsControlledBy(m, ms) {
				continue
			}
			current++
			pm := Machine{Name: m.Name, Owner: owner, Verdict: Kept}
			switch {
			case !old:
			case inPlace && collections.IsUnhealthyAndOwnerRemediated(m):
				// CAPI deletes it rather than move it; its MachineSet's
				// replacement comes from the new one.
				pm.Verdict, pm.Reasons = Replaced, []string{"unhealthy, and remediated by its owner: CAPI deletes it rather than update it in place"}
			case inPlace:
				pm.Verdict = UpdatedInPlace
				pm.Reasons = append(slices.Clone(results[ms.Name].ConditionMessages), inPlaceReason(answer)...)
			default:
				pm.Verdict = Replaced
				if md.Spec.Rollout.Strategy.Type == clusterv1.OnDeleteMachineDeploymentStrategyType {
					pm.Verdict = Outdated
				}
				pm.Reasons = results[ms.Name].ConditionMessages
				if len(pm.Reasons) == 0 {
					pm.Reasons = []string{"rolloutAfter has passed, or its MachineSet is already being rolled out"}
				}
				pm.Reasons = append(slices.Clone(pm.Reasons), inPlaceReason(answer)...)
			}
			out = append(out, pm)
		}
	}
	return out, scaled(owner, current, md.Spec.Replicas), nil
}

func scaled(owner string, current int32, want *int32) *Scale {
	if want == nil || *want == current {
		return nil
	}
	return &Scale{Owner: owner, From: current, To: *want}
}

// predictControlPlane decides as the KubeadmControlPlane controller does:
// every Machine that is not UpToDate with the desired control plane is
// replaced.
func predictControlPlane(ctx context.Context, r client.Client, o *Observed, cl *clusterv1.Cluster, kcp *controlplanev1.KubeadmControlPlane, now metav1.Time) ([]Machine, *Scale, error) {
	owner := "KubeadmControlPlane/" + kcp.Name
	configs := map[string]*bootstrapv1.KubeadmConfig{}
	for i := range o.KubeadmConfigs {
		kc := &o.KubeadmConfigs[i]
		for _, ref := range kc.OwnerReferences {
			if ref.Kind == "Machine" {
				configs[ref.Name] = kc
			}
		}
	}
	var out []Machine
	var current int32
	for i := range o.Machines {
		m := &o.Machines[i]
		if !metav1.IsControlledBy(m, kcp) {
			continue
		}
		current++
		upToDate, res, err := kcpfilters.UpToDate(ctx, r, cl, m, kcp, &now, o.InfraMachines, configs)
		if err != nil {
			return nil, nil, errors.Wrapf(err, "cannot decide whether Machine %s is up to date", m.Name)
		}
		pm := Machine{Name: m.Name, Owner: owner, Verdict: Kept}
		if !upToDate {
			pm.Verdict, pm.Reasons = Replaced, res.ConditionMessages
		}
		out = append(out, pm)
	}
	return out, scaled(owner, current, kcp.Spec.Replicas), nil
}

// unpredicted says which Machines of a cluster no rule above decided on:
// those of a MachinePool or of no owner plan knows.
func unpredicted(o *Observed, cluster string, decided []Machine) []string {
	var out []string
	for i := range o.Machines {
		m := &o.Machines[i]
		if m.Spec.ClusterName != cluster || slices.ContainsFunc(decided, func(d Machine) bool { return d.Name == m.Name }) {
			continue
		}
		owner := "no owner"
		if ref := metav1.GetControllerOf(m); ref != nil {
			owner = ref.Kind + " " + ref.Name
		}
		out = append(out, fmt.Sprintf("Machine %s (%s): plan predicts the Machines of MachineDeployments and KubeadmControlPlanes only", m.Name, owner))
	}
	sort.Strings(out)
	return out
}

// sortedValues are a map's values by key.
func sortedValues[T any](m map[string]T) []T {
	out := make([]T, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}

// Summary is one line per cluster: how many Machines are replaced and kept.
func (c Cluster) Summary() string {
	n := map[Verdict]int{}
	for _, m := range c.Machines {
		n[m.Verdict]++
	}
	parts := []string{fmt.Sprintf("%d replaced", n[Replaced]), fmt.Sprintf("%d kept", n[Kept])}
	if n[UpdatedInPlace] > 0 {
		parts = append(parts, fmt.Sprintf("%d updated in place", n[UpdatedInPlace]))
	}
	if n[Outdated] > 0 {
		parts = append(parts, fmt.Sprintf("%d outdated until deleted", n[Outdated]))
	}
	for _, s := range c.Scales {
		parts = append(parts, fmt.Sprintf("%s scaled %d→%d", s.Owner, s.From, s.To))
	}
	return strings.Join(parts, ", ")
}
