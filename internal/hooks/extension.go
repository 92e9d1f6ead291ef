// Package hooks answers CAPI's in-place update hooks CanUpdateMachineSet,
// CanUpdateMachine and UpdateMachine for CAPXP: the manager serves the
// answers (controllers/inplace), and capxp plan asks them as CAPI would
// (internal/plan).
//
// The hooks read the objects they judge from the API server, never from
// the request alone: a request says which Machine or MachineSet it is
// about, and what CAPI would change. CanUpdate* answer with patches of the
// infrastructure template or XR covering the fields every running
// machine's CompositionRevision declares it takes in place, and of the
// bootstrap config or template covering the fields the revision declares
// its hosts apply (bridge/inplace); when anything is refused nothing is
// patched, and CAPI rolls the machines. UpdateMachine writes nothing: CAPI
// has already applied the change to the XR and the bootstrap config,
// Crossplane composes the XR's, and the hook reports progress until the XR
// and everything it composed have taken it.
//
// State: none. Each call reads what it needs; the handlers hold only their
// clients.
package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/util/labels/format"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	"github.com/capxp/cluster-api-provider-crossplane/bridge/inplace"
)

// ExtensionConfigName names the ExtensionConfig that registers the hooks
// with CAPI; CAPI names each handler <handler>.<ExtensionConfigName>.
const ExtensionConfigName = "capxp"

// How often CAPI asks again about an update under way.
const retryAfterSeconds = 3

// compositionNameLabel is the label Crossplane puts on a
// CompositionRevision: the name of its Composition.
const compositionNameLabel = "crossplane.io/composition-name"

// maxMachines and maxResources bound what one call reads: a MachineSet's
// Machines, and the resources an XR references.
const (
	maxMachines  = 500
	maxResources = 64
)

// compositionRevision is Crossplane's CompositionRevision kind.
var compositionRevision = schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1", Kind: "CompositionRevision"}

// Extension answers CAPI's in-place update hooks.
type Extension struct {
	// cached reads Machines, as the bridge caches them.
	cached client.Reader
	// live reads XRs, what they composed and CompositionRevisions.
	live   client.Reader
	mapper kmeta.RESTMapper
}

// NewExtension returns the hooks, reading Machines through cached and
// everything else through live.
func NewExtension(cached, live client.Reader, mapper kmeta.RESTMapper) *Extension {
	return &Extension{cached: cached, live: live, mapper: mapper}
}

// CanUpdateMachineSet answers whether a MachineDeployment's machines can
// move from one MachineSet's template to another's in place: the
// infrastructure and bootstrap templates' changes are patched where every
// running machine's revision declares them. The MachineSet's own spec is
// never patched: a change there rolls the machines.
func (e *Extension) CanUpdateMachineSet(ctx context.Context, req *runtimehooksv1.CanUpdateMachineSetRequest, resp *runtimehooksv1.CanUpdateMachineSetResponse) {
	ms := &req.Current.MachineSet
	log := ctrl.LoggerFrom(ctx).WithValues("MachineSet", klog.KObj(ms))
	if b := ms.Spec.Template.Spec.Bootstrap; !b.ConfigRef.IsDefined() {
		// CAPI starts an in-place update only once a Machine's bootstrap
		// data is reported created, which only a bootstrap config
		// reports: a Machine given its data Secret by name would wait
		// forever. So it is replaced.
		resp.Status = runtimehooksv1.ResponseStatusSuccess
		resp.Message = "replace: the Machines take their bootstrap data Secret by name (spec.template.spec.bootstrap.dataSecretName), and CAPI updates in place only Machines of a bootstrap config"
		return
	}
	sp, ok := decode(resp,
		[2][]byte{req.Current.InfrastructureMachineTemplate.Raw, req.Desired.InfrastructureMachineTemplate.Raw},
		[2][]byte{req.Current.BootstrapConfigTemplate.Raw, req.Desired.BootstrapConfigTemplate.Raw},
		"spec", "template", "spec")
	if !ok {
		return
	}
	machines := &clusterv1.MachineList{}
	if err := e.cached.List(ctx, machines, client.InNamespace(ms.Namespace), client.MatchingLabels{clusterv1.MachineSetNameLabel: format.MustFormatValue(ms.Name)}); err != nil {
		fail(resp, errors.Wrapf(err, "cannot list the Machines of MachineSet %s", klog.KObj(ms)))
		return
	}
	if len(machines.Items) > maxMachines {
		resp.Status = runtimehooksv1.ResponseStatusSuccess
		resp.Message = fmt.Sprintf("replace: MachineSet %s has %d Machines, more than the %d the extension judges", ms.Name, len(machines.Items), maxMachines)
		return
	}
	xrs, err := e.xrsOf(ctx, ms, machines.Items)
	if err != nil {
		fail(resp, err)
		return
	}
	revisions := make([]inplace.Revision, 0, len(machines.Items))
	read := map[string]inplace.Revision{}
	for i := range machines.Items {
		r, err := e.revisionOf(ctx, &machines.Items[i], xrs, read)
		if err != nil {
			fail(resp, err)
			return
		}
		revisions = append(revisions, r)
	}
	a := sp.judge(revisions)
	resp.Status = runtimehooksv1.ResponseStatusSuccess
	resp.Message = a.summary()
	log.V(4).Info("CanUpdateMachineSet", "changed", a.infra.Changed, "inPlace", a.infra.InPlace, "refused", a.infra.Refused,
		"bootstrapChanged", a.bootstrap.Changed, "bootstrapInPlace", a.bootstrap.InPlace, "bootstrapRefused", a.bootstrap.Refused)
	if !a.updatable() {
		return
	}
	infra, bootstrap, err := a.patches([]string{"spec", "template", "spec"}, sp)
	if err != nil {
		fail(resp, err)
		return
	}
	resp.InfrastructureMachineTemplatePatch = infra
	resp.BootstrapConfigTemplatePatch = bootstrap
}

// CanUpdateMachine answers whether one Machine (of a KubeadmControlPlane)
// can take a change of its XR and its bootstrap config in place, by the
// revision the live XR is pinned to. The Machine itself is never patched.
func (e *Extension) CanUpdateMachine(ctx context.Context, req *runtimehooksv1.CanUpdateMachineRequest, resp *runtimehooksv1.CanUpdateMachineResponse) {
	m := &req.Current.Machine
	log := ctrl.LoggerFrom(ctx).WithValues("Machine", klog.KObj(m))
	sp, ok := decode(resp,
		[2][]byte{req.Current.InfrastructureMachine.Raw, req.Desired.InfrastructureMachine.Raw},
		[2][]byte{req.Current.BootstrapConfig.Raw, req.Desired.BootstrapConfig.Raw},
		"spec")
	if !ok {
		return
	}
	live := &clusterv1.Machine{}
	if err := e.cached.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Name}, live); err != nil {
		fail(resp, errors.Wrapf(err, "cannot get Machine %s", klog.KObj(m)))
		return
	}
	r, err := e.revisionOf(ctx, live, nil, map[string]inplace.Revision{})
	if err != nil {
		fail(resp, err)
		return
	}
	a := sp.judge([]inplace.Revision{r})
	resp.Status = runtimehooksv1.ResponseStatusSuccess
	resp.Message = a.summary()
	log.V(4).Info("CanUpdateMachine", "changed", a.infra.Changed, "inPlace", a.infra.InPlace, "refused", a.infra.Refused,
		"bootstrapChanged", a.bootstrap.Changed, "bootstrapInPlace", a.bootstrap.InPlace, "bootstrapRefused", a.bootstrap.Refused)
	if !a.updatable() {
		return
	}
	infra, bootstrap, err := a.patches([]string{"spec"}, sp)
	if err != nil {
		fail(resp, err)
		return
	}
	resp.InfrastructureMachinePatch = infra
	resp.BootstrapConfigPatch = bootstrap
}

// UpdateMachine reports how an in-place update of a Machine is going. CAPI
// has written the change to the Machine's XR before it calls; the hook
// reads the live Machine and XR (the request names the Machine, and is
// not trusted further) and answers done once the XR and all it composed
// have taken the XR's current generation.
func (e *Extension) UpdateMachine(ctx context.Context, req *runtimehooksv1.UpdateMachineRequest, resp *runtimehooksv1.UpdateMachineResponse) {
	key := types.NamespacedName{Namespace: req.Desired.Machine.Namespace, Name: req.Desired.Machine.Name}
	m := &clusterv1.Machine{}
	// Live: the cache may not have CAPI's mark yet.
	if err := e.live.Get(ctx, key, m); err != nil {
		fail(resp, errors.Wrapf(err, "cannot get Machine %s", key))
		return
	}
	if _, ok := m.Annotations[clusterv1.UpdateInProgressAnnotation]; !ok {
		fail(resp, errors.Errorf("Machine %s is not being updated in place", key))
		return
	}
	xr, err := e.xrOf(ctx, m)
	if err != nil {
		fail(resp, err)
		return
	}
	resp.Status = runtimehooksv1.ResponseStatusSuccess
	if _, ok := xr.GetAnnotations()[clusterv1.UpdateInProgressAnnotation]; !ok {
		resp.Message = fmt.Sprintf("waiting for CAPI to write the change to %s %s", xr.GetKind(), xr.GetName())
		resp.RetryAfterSeconds = retryAfterSeconds
		return
	}
	composed, missing, err := e.composedBy(ctx, xr)
	if err != nil {
		fail(resp, err)
		return
	}
	v := inplace.Progress(xr, composed, missing)
	if !v.Ready {
		resp.Message = fmt.Sprintf("%s %s: %s", xr.GetKind(), xr.GetName(), v.Message)
		resp.RetryAfterSeconds = retryAfterSeconds
		return
	}
	resp.Message = fmt.Sprintf("%s %s and everything it composed took the change", xr.GetKind(), xr.GetName())
}

// xrOf reads a Machine's XR, live.
func (e *Extension) xrOf(ctx context.Context, m *clusterv1.Machine) (*composite.Unstructured, error) {
	ref := m.Spec.InfrastructureRef
	gk := schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
	mapping, err := e.mapper.RESTMapping(gk)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot map %s, the infrastructure of Machine %s", gk, klog.KObj(m))
	}
	xr := composite.New(composite.WithGroupVersionKind(mapping.GroupVersionKind))
	if err := e.live.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: ref.Name}, xr); err != nil {
		return nil, errors.Wrapf(err, "cannot get %s %s, the infrastructure of Machine %s", ref.Kind, ref.Name, klog.KObj(m))
	}
	return xr, nil
}

// xrKey names an XR among those listed: its kind, group and name.
func xrKey(gk schema.GroupKind, name string) string { return gk.String() + "/" + name }

// xrsOf lists, live, the XRs of a MachineSet's Machines, by xrKey: one
// request per kind, selected by the MachineSet's label, which CAPI puts on
// the infrastructure it creates for each Machine. A hundred Machines are a
// request, not a hundred, well within the hook's timeout. A Machine whose
// XR is not among them (a kind that cannot be listed, a label since
// changed) has it read by name.
func (e *Extension) xrsOf(ctx context.Context, ms *clusterv1.MachineSet, machines []clusterv1.Machine) (map[string]*composite.Unstructured, error) {
	out := map[string]*composite.Unstructured{}
	listed := map[schema.GroupKind]bool{}
	for i := range machines {
		ref := machines[i].Spec.InfrastructureRef
		gk := schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
		if listed[gk] {
			continue
		}
		listed[gk] = true
		mapping, err := e.mapper.RESTMapping(gk)
		if err != nil {
			// Read by name, and judged there.
			continue
		}
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(gk.Kind + "List"))
		err = e.live.List(ctx, l, client.InNamespace(ms.Namespace), client.MatchingLabels{clusterv1.MachineSetNameLabel: format.MustFormatValue(ms.Name)}, client.Limit(maxMachines))
		switch {
		case apierrors.IsForbidden(err) || kmeta.IsNoMatchError(err):
			continue
		case err != nil:
			return nil, errors.Wrapf(err, "cannot list the %s of MachineSet %s", gk.Kind, klog.KObj(ms))
		}
		for j := range l.Items {
			xr := composite.New(composite.WithGroupVersionKind(mapping.GroupVersionKind))
			xr.Object = l.Items[j].Object
			out[xrKey(gk, xr.GetName())] = xr
		}
	}
	return out, nil
}

// revisionOf reads the CompositionRevision a Machine's XR (among xrs, or
// else read by name) is pinned to and what it declares. An XR not composed
// yet, or a revision gone, is a revision that declares nothing, with the
// reason; an API error is an error.
func (e *Extension) revisionOf(ctx context.Context, m *clusterv1.Machine, xrs map[string]*composite.Unstructured, read map[string]inplace.Revision) (inplace.Revision, error) {
	ref := m.Spec.InfrastructureRef
	xr, ok := xrs[xrKey(schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}, ref.Name)]
	var err error
	if !ok {
		xr, err = e.xrOf(ctx, m)
	}
	switch cause := errors.Cause(err); {
	case err == nil:
	case apierrors.IsNotFound(cause):
		return inplace.Revision{Name: "of Machine " + m.Name, Err: errors.New("its infrastructure is gone")}, nil
	case apierrors.IsForbidden(cause) || kmeta.IsNoMatchError(cause):
		// Another provider's machine: not CAPXP's to update.
		return inplace.Revision{Name: "of Machine " + m.Name, Err: errors.Errorf("its infrastructure, a %s, is not a kind CAPXP reads", m.Spec.InfrastructureRef.Kind)}, nil
	default:
		return inplace.Revision{}, err
	}
	rev := xr.GetCompositionRevisionReference()
	if rev == nil || rev.Name == "" {
		return inplace.Revision{Name: "of " + xr.GetKind() + " " + xr.GetName(), Err: errors.New("the XR is not composed yet")}, nil
	}
	composition := ""
	if c := xr.GetCompositionReference(); c != nil {
		composition = c.Name
	}
	key := composition + "/" + rev.Name
	if r, ok := read[key]; ok {
		return r, nil
	}
	r, err := e.revision(ctx, rev.Name, composition)
	if err == nil {
		read[key] = r
	}
	return r, err
}

// revision reads a CompositionRevision and what it declares; one that is
// not a revision of the XR's Composition (the XR's author can write the
// reference) declares nothing.
func (e *Extension) revision(ctx context.Context, name, composition string) (inplace.Revision, error) {
	rev := &metav1.PartialObjectMetadata{}
	rev.SetGroupVersionKind(compositionRevision)
	if err := e.live.Get(ctx, types.NamespacedName{Name: name}, rev); err != nil {
		if apierrors.IsNotFound(err) {
			return inplace.Revision{Name: name, Err: errors.New("not found")}, nil
		}
		return inplace.Revision{}, errors.Wrapf(err, "cannot get CompositionRevision %s", name)
	}
	if of := rev.GetLabels()[compositionNameLabel]; of == "" || of != composition {
		return inplace.Revision{Name: name, Err: errors.Errorf("not a revision of the XR's Composition %q", composition)}, nil
	}
	// A declaration that cannot be read is the revision's verdict, not
	// the call's error: the revision declares nothing, and says why.
	r := inplace.Revision{Name: name}
	if r.Fields, r.Err = inplace.Declared(rev.GetAnnotations()); r.Err == nil {
		r.Bootstrap, r.Err = inplace.DeclaredBootstrap(rev.GetAnnotations())
	}
	if r.Err != nil {
		r.Fields, r.Bootstrap = inplace.Fields{}, inplace.Fields{}
	}
	return r, nil
}

// composedBy reads, live, the namespaced resources an XR references (at
// most maxResources) that it controls. A reference to a resource the XR
// does not control is not followed further: the XR's author can write its
// references. A resource
// not found yet is listed as missing; one the manager may not read is left
// to the XR's own readiness, which Crossplane derives from it.
func (e *Extension) composedBy(ctx context.Context, xr *composite.Unstructured) ([]*unstructured.Unstructured, []string, error) {
	var composed []*unstructured.Unstructured
	var missing []string
	refs := xr.GetResourceReferences()
	if len(refs) > maxResources {
		refs = refs[:maxResources]
	}
	for _, ref := range refs {
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil {
			continue
		} else if m, err := e.mapper.RESTMapping(gv.WithKind(ref.Kind).GroupKind(), gv.Version); err != nil || m.Scope.Name() != kmeta.RESTScopeNameNamespace {
			// Only what a namespaced XR composes: resources of its own
			// namespace.
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(ref.APIVersion)
		u.SetKind(ref.Kind)
		err := e.live.Get(ctx, types.NamespacedName{Namespace: xr.GetNamespace(), Name: ref.Name}, u)
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, ref.Kind+" "+ref.Name)
			continue
		case apierrors.IsForbidden(err) || kmeta.IsNoMatchError(err):
			continue
		case err != nil:
			return nil, nil, errors.Wrapf(err, "cannot get %s %s, composed by %s %s", ref.Kind, ref.Name, xr.GetKind(), xr.GetName())
		}
		if c := metav1.GetControllerOf(u); c == nil || c.UID != xr.GetUID() {
			continue
		}
		composed = append(composed, u)
	}
	return composed, missing, nil
}

// specs are what a request changes: the infrastructure's spec and the
// bootstrap config's, current and desired.
type specs struct {
	current, desired   map[string]any
	bCurrent, bDesired map[string]any
}

// decode reads a request's infrastructure and bootstrap objects (current,
// desired) and returns the spec at path of each: spec.template.spec of
// templates, spec of objects. A request without bootstrap objects changes
// no bootstrap field. When it cannot read them, decode has answered resp
// and returns false: a bootstrap config added or removed is not a change
// CAPXP makes in place, answered as a replacement; a malformed object is
// a failure.
func decode(resp response, infra, bootstrap [2][]byte, path ...string) (specs, bool) {
	var sp specs
	var err error
	if sp.current, sp.desired, err = specsAt("infrastructure", infra[0], infra[1], path...); err != nil {
		fail(resp, err)
		return sp, false
	}
	switch {
	case len(bootstrap[0]) == 0 && len(bootstrap[1]) == 0:
		return sp, true
	case len(bootstrap[0]) == 0 || len(bootstrap[1]) == 0:
		resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
		resp.SetMessage("replace: a bootstrap config added or removed is not a change of its fields")
		return sp, false
	}
	if sp.bCurrent, sp.bDesired, err = specsAt("bootstrap", bootstrap[0], bootstrap[1], path...); err != nil {
		fail(resp, err)
		return sp, false
	}
	return sp, true
}

// specsAt decodes two objects of the request, the what (infrastructure or
// bootstrap) object each, and returns the spec at path of each.
func specsAt(what string, current, desired []byte, path ...string) (map[string]any, map[string]any, error) {
	var out [2]map[string]any
	for i, raw := range [][]byte{current, desired} {
		obj := map[string]any{}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, nil, errors.Wrapf(err, "cannot decode the %s object of the request", what)
		}
		spec, _, err := unstructured.NestedMap(obj, path...)
		if err != nil {
			return nil, nil, errors.Wrapf(err, "cannot read %s of the request's %s object", strings.Join(path, "."), what)
		}
		out[i] = spec
	}
	return out[0], out[1], nil
}

// An answer is what the hooks decided of a change: of the infrastructure,
// and of the bootstrap config.
type answer struct {
	infra, bootstrap inplace.Decision
}

// judge decides both halves of a change against the running machines'
// revisions.
func (sp specs) judge(revisions []inplace.Revision) answer {
	return answer{
		infra:     inplace.Decide(sp.current, sp.desired, revisions),
		bootstrap: inplace.DecideBootstrap(sp.bCurrent, sp.bDesired, revisions),
	}
}

// updatable reports whether the change is taken in place as a whole:
// nothing refused, and something patched.
func (a answer) updatable() bool {
	return a.infra.Updatable() && a.bootstrap.Updatable() && len(a.infra.InPlace)+len(a.bootstrap.InPlace) > 0
}

// patches returns the merge patches of what is taken in place: the
// infrastructure object's and the bootstrap object's, each where at says
// (a template's spec.template.spec, or an object's spec). A half with
// nothing taken in place has no patch.
func (a answer) patches(at []string, sp specs) (runtimehooksv1.Patch, runtimehooksv1.Patch, error) {
	var out [2]runtimehooksv1.Patch
	for i, half := range []struct {
		fields  []string
		desired map[string]any
	}{{a.infra.InPlace, sp.desired}, {a.bootstrap.InPlace, sp.bDesired}} {
		if len(half.fields) == 0 {
			continue
		}
		p, err := inplace.MergePatch(at, half.desired, half.fields)
		if err != nil {
			return out[0], out[1], err
		}
		out[i] = runtimehooksv1.Patch{PatchType: runtimehooksv1.JSONMergePatchType, Patch: p}
	}
	return out[0], out[1], nil
}

// summary is an answer as CAPI logs it.
func (a answer) summary() string {
	var refused, inPlace []string
	refused = append(refused, a.infra.Refused...)
	for _, r := range a.bootstrap.Refused {
		refused = append(refused, "bootstrap config "+r)
	}
	inPlace = append(inPlace, a.infra.InPlace...)
	for _, f := range a.bootstrap.InPlace {
		inPlace = append(inPlace, "bootstrap config "+f)
	}
	switch {
	case len(refused) > 0:
		return "replace: " + strings.Join(refused, "; ")
	case len(inPlace) > 0:
		return "in place: " + strings.Join(inPlace, ", ")
	}
	return "no change of the infrastructure or the bootstrap config's spec"
}

// response is what every hook's response lets the handlers set.
type response interface {
	SetStatus(runtimehooksv1.ResponseStatus)
	SetMessage(string)
}

// fail answers a hook with an error. CAPI retries a failed call, and rolls
// nothing in place meanwhile.
func fail(resp response, err error) {
	resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
	resp.SetMessage(err.Error())
}
