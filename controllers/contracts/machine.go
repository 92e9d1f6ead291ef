package contracts

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/external"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/predicates"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"
	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/gate"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/outputs"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/xrd"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/composed"
)

const (
	errGetOwnerMachine = "cannot get the owner Machine"
	errGetCluster      = "cannot get the Machine's Cluster"
	errGetClusterXR    = "cannot get the cluster's infrastructure"
)

// infraMachine is the InfraMachine seam: the owner is a Machine; the XR stays
// paused until the gate opens, which injects what the composition needs; the
// providerID output goes to spec.providerID.
type infraMachine struct {
	infrastructure
	client client.Client
	// missing says which verbs the bridge lacks on a kind. The
	// cluster's infrastructure is read through the manager's cache, whose
	// informer for a kind the bridge may not list never syncs: a read would
	// wait for it, holding a worker, with nothing said.
	missing composed.MissingAccess
}

// pauseUnowned keeps a machine XR without its Machine paused: the admission
// policy paused it at creation; one it did not catch (created before its
// kind was adapted) is paused here, unless Crossplane composed it already.
func (infraMachine) PauseUnowned(xr *composite.Unstructured) *bool {
	if len(xr.GetResourceReferences()) == 0 {
		return ptr.To(true)
	}
	return nil
}

// Owner is the Machine that owns the XR, and the Machine's Cluster; none
// until that Cluster exists, except for a deleting XR.
func (m infraMachine) Owner(ctx context.Context, s *Scope) error {
	machine, err := util.GetOwnerMachine(ctx, m.client, ownedBy(s.XR))
	if err = client.IgnoreNotFound(err); err != nil || machine == nil {
		return errors.Wrap(err, errGetOwnerMachine)
	}
	cluster, err := util.GetClusterFromMetadata(ctx, m.client, machine.ObjectMeta)
	if ok, err := ownedIn(s, machine, cluster, err, errGetCluster); !ok {
		return err
	}
	s.Machine = machine
	return nil
}

// ownedIn fills s with the XR's owner and the owner's Cluster, as read
// (err), and reports whether it did: not until that Cluster exists, since
// there is nothing to compose for, except for a deleting XR.
func ownedIn(s *Scope, owner client.Object, cluster *clusterv1.Cluster, err error, errGet string) (bool, error) {
	if client.IgnoreNotFound(err) != nil {
		return false, errors.Wrap(err, errGet)
	}
	if cluster == nil && s.XR.GetDeletionTimestamp().IsZero() {
		return false, nil
	}
	s.Owner, s.Cluster = owner, cluster
	return true, nil
}

// Prepare runs the gate: closed, it returns why; open, it injects into the
// working copy what the composition needs (the bootstrap data reference, the
// failure domain, the cluster's network and credentials), which the one
// deferred patch sends together with the unpause, so Crossplane never
// composes a half-configured machine.
func (m infraMachine) Prepare(ctx context.Context, s *Scope) (*verdict.Verdict, error) {
	clusterXR, forbidden, err := m.clusterInfrastructure(ctx, s.Cluster)
	if err != nil || forbidden != nil {
		return forbidden, err
	}
	in := gate.Inputs{Machine: s.Machine, Cluster: s.Cluster, ClusterXR: clusterXR, XR: &s.XR.Unstructured}
	d := gate.Decide(in)
	if d.Ready && len(d.Spec) > 0 {
		// Opening: with the provider ID the Composition declares, if any.
		in.ProviderID, in.ProviderIDFrom, err = providerIDTemplate(ctx, m.client, s.XR)
		if err != nil {
			return nil, err
		}
		if in.ProviderID != "" {
			d = gate.Decide(in)
		}
	}
	return inject(s, d)
}

// clusterInfrastructure reads the cluster's XR, which holds the failure
// domains, network and credentials machines and pools inherit, once the
// Cluster says its infrastructure is provisioned (nil before); an error then
// is retried, never taken as "nothing to inherit". A verdict says the bridge
// may not read its kind.
func (m infraMachine) clusterInfrastructure(ctx context.Context, cluster *clusterv1.Cluster) (*unstructured.Unstructured, *verdict.Verdict, error) {
	if !ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false) {
		return nil, nil, nil
	}
	// Whatever the cluster's infrastructure kind, the bridge must be granted
	// it: say so rather than wait in silence. A cluster without one (a
	// managed control plane's may have none) gives nothing to inherit.
	ref := cluster.Spec.InfrastructureRef
	if !ref.IsDefined() {
		return nil, nil, nil
	}
	missing, err := m.mayRead(ctx, schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind})
	var clusterXR *unstructured.Unstructured
	if err == nil && len(missing) == 0 {
		clusterXR, err = external.GetObjectFromContractVersionedRef(ctx, m.client, ref, cluster.Namespace)
		if apierrors.IsForbidden(err) {
			missing, err = []string{"get"}, nil
		}
	}
	if err != nil {
		return nil, nil, errors.Wrap(err, errGetClusterXR)
	}
	if len(missing) > 0 {
		return nil, &verdict.Verdict{Reason: infrav1.ForbiddenReason, Message: fmt.Sprintf(
			"The bridge may not %s %s, the kind of Cluster %s's infrastructure, for the failure domains, network and credentials its machines inherit: grant it with a ClusterRole labelled %s: \"true\"",
			strings.Join(missing, ", "), ref.Kind, cluster.Name, xrd.AggregateToBridgeLabel)}, nil
	}
	return clusterXR, nil, nil
}

// inject applies a closed gate's verdict, or an open gate's spec fields to
// the working copy: a map field completes what the XR holds (the network a
// template named), nil removes one, any other replaces it. The injection's sources go to an
// annotation, for users to see where each field came from.
func inject(s *Scope, d gate.Decision) (*verdict.Verdict, error) {
	if !d.Ready {
		return &verdict.Verdict{Reason: d.Reason, Message: d.Message}, nil
	}
	if err := gate.Inject(&s.XR.Unstructured, d.Spec); err != nil {
		return nil, err
	}
	if len(d.Sources) > 0 {
		meta.AddAnnotations(&s.XR.Unstructured, map[string]string{infrav1.InjectedFromAnnotation: injectedFrom(s.XR.GetAnnotations()[infrav1.InjectedFromAnnotation], d.Sources)})
	}
	return nil, nil
}

// injectedFrom merges new sources ("spec.<field>: <where from>") into the
// annotation's lines: a pool's later injections (its replicas) replace the
// lines of their fields and keep the others.
func injectedFrom(annotation string, sources []string) string {
	byField := map[string]string{}
	for _, line := range append(strings.Split(annotation, "\n"), sources...) {
		if f, _, ok := strings.Cut(line, ": "); ok {
			byField[f] = line
		}
	}
	return strings.Join(slices.Sorted(maps.Values(byField)), "\n")
}

// mayRead says which of get, list and watch the bridge may not use on a
// kind.
func (m infraMachine) mayRead(ctx context.Context, gk schema.GroupKind) ([]string, error) {
	mapping, err := m.client.RESTMapper().RESTMapping(gk)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot find the resource of %s", gk)
	}
	return m.missing(ctx, mapping.Resource.GroupResource())
}

// outputs maps providerID. A machine's provisioning is recorded by no event
// of the bridge's: CAPI reports it on the Machine (its phase and
// InfrastructureReady), and an event per machine of a fleet is noise.
func (infraMachine) Outputs(s *Scope) (outputs.Fields, string, field.ErrorList) {
	out, errs := outputs.MapMachine(&s.XR.Unstructured)
	return out.Spec(), "", errs
}

func (infraMachine) WaitBeforeDelete(context.Context, *composite.Unstructured) (*verdict.Verdict, error) {
	return nil, nil
}

func (infraMachine) Watches(k WatchEnv, gvk schema.GroupVersionKind, _ *unstructured.Unstructured) []Watch {
	return []Watch{
		// The Machine's spec (bootstrap data, failure domain), its deletion
		// and the bridge's verdict on it; CAPI's many status writes are
		// none of the XR's business.
		{Object: &clusterv1.Machine{}, Map: util.MachineToInfrastructureMapFunc(gvk),
			Predicates: []predicate.Predicate{predicate.Funcs{UpdateFunc: ownerChanged}}},
		clusterGates(k, gvk),
	}
}

// clusterGates watches the Cluster's creation, pause and infrastructure
// provisioning, which gate every machine and pool of the cluster, and the
// other transitions given (a pool's gate also waits for the control
// plane); a Cluster's status changes as its machines do, and each would
// wake them all.
func clusterGates(k WatchEnv, gvk schema.GroupVersionKind, also ...predicate.Funcs) Watch {
	log := k.Log
	update := predicates.Any(k.Scheme, log,
		append([]predicate.Funcs{predicates.ClusterPausedTransitionsOrInfrastructureProvisioned(k.Scheme, log)}, also...)...)
	return Watch{Object: &clusterv1.Cluster{}, Map: listByCluster(k.Client, gvk),
		Predicates: []predicate.Predicate{predicate.Funcs{
			UpdateFunc:  update.Update,
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		}}}
}

// ownerChanged passes the updates of a Machine or MachinePool its XR
// depends on: a new generation (the bootstrap data secret name, the failure
// domain, a pool's replicas), the start of its deletion, and a change of
// the bridge's verdict (so one removed by someone else is restored).
func ownerChanged(e event.UpdateEvent) bool {
	o, n := e.ObjectOld, e.ObjectNew
	if o.GetGeneration() != n.GetGeneration() || o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero() {
		return true
	}
	og, ok := o.(conditions.Getter)
	ng, ok2 := n.(conditions.Getter)
	if !ok || !ok2 {
		return true
	}
	return !equality.Semantic.DeepEqual(
		conditions.Get(og, infrav1.CrossplaneInfrastructureReadyCondition),
		conditions.Get(ng, infrav1.CrossplaneInfrastructureReadyCondition))
}

// listByCluster maps a Cluster to the XRs of a kind labelled with its name.
func listByCluster(c client.Client, gvk schema.GroupVersionKind) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, xr := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&xr)})
		}
		return reqs
	}
}

// reselects: its XRs are replaced, never re-templated.
func (infraMachine) Reselects() bool { return false }

const (
	errGetXRD         = "cannot get CompositeResourceDefinition"
	errGetComposition = "cannot get the Composition the composite resource composes with"
)

// providerIDTemplate is the provider ID template (infrav1.ProviderIDAnnotation)
// of the Composition a machine XR not composed yet will compose with, and
// that Composition's name for messages. The bridge picks it as Crossplane
// will: the XRD's enforced Composition, else the XR's reference, else the
// Compositions of the XR's kind its selector matches (Crossplane takes any
// one of them, so they must all declare the same template), else the XRD's
// default. None ("") when the XR has its provider ID or was composed
// before, when that Composition declares none, or when the candidates
// disagree: the provider ID is then copied from the outputs once the XR is
// Ready, as always.
func providerIDTemplate(ctx context.Context, c client.Client, xr *composite.Unstructured) (string, string, error) {
	if id, _, _ := unstructured.NestedString(xr.Object, "spec", "providerID"); id != "" {
		return "", "", nil
	}
	if secret, _, _ := unstructured.NestedString(xr.Object, "spec", "bootstrap", "dataSecretRef", "name"); secret != "" {
		return "", "", nil
	}
	xrd, err := definition(ctx, c, xr)
	if err != nil {
		return "", "", err
	}
	ref := xr.GetCompositionReference()
	switch {
	case xrd != nil && xrd.Spec.EnforcedCompositionRef != nil:
		return compositionTemplate(ctx, c, xrd.Spec.EnforcedCompositionRef.Name)
	case ref != nil && ref.Name != "":
		return compositionTemplate(ctx, c, ref.Name)
	case xr.GetCompositionSelector() != nil:
		return selectedTemplate(ctx, c, xr)
	case xrd != nil && xrd.Spec.DefaultCompositionRef != nil:
		return compositionTemplate(ctx, c, xrd.Spec.DefaultCompositionRef.Name)
	}
	return "", "", nil
}

// definition is the XRD of xr's kind; nil if there is none (the kind is a
// CRD of its own). An XRD is named after its kind's resource and group: it
// is read by that name, from the cache without a copy (XRDs carry whole
// schemas, and nothing here is written).
func definition(ctx context.Context, c client.Client, xr *composite.Unstructured) (*xpextv2.CompositeResourceDefinition, error) {
	gvk := xr.GroupVersionKind()
	m, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if apimeta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, errors.Wrap(err, errGetXRD)
	}
	x := &xpextv2.CompositeResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: m.Resource.Resource + "." + gvk.Group}, x, client.UnsafeDisableDeepCopy); err != nil {
		return nil, errors.Wrap(client.IgnoreNotFound(err), errGetXRD)
	}
	if x.Spec.Names.Kind != gvk.Kind {
		return nil, nil
	}
	return x, nil
}

// compositionTemplate is the template of the named Composition; none if
// it does not exist (Crossplane says so on the XR).
func compositionTemplate(ctx context.Context, c client.Reader, name string) (string, string, error) {
	comp := &xpextv1.Composition{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, comp, client.UnsafeDisableDeepCopy); err != nil {
		return "", "", errors.Wrap(client.IgnoreNotFound(err), errGetComposition)
	}
	return comp.GetAnnotations()[infrav1.ProviderIDAnnotation], "Composition " + name, nil
}

// selectedTemplate is the template every Composition of xr's kind that its
// selector matches declares; none if they differ or none matches.
func selectedTemplate(ctx context.Context, c client.Reader, xr *composite.Unstructured) (string, string, error) {
	sel, err := metav1.LabelSelectorAsSelector(xr.GetCompositionSelector())
	if err != nil {
		return "", "", nil //nolint:nilerr // Crossplane reports an invalid selector on the XR.
	}
	list := &xpextv1.CompositionList{}
	if err := c.List(ctx, list, client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
		return "", "", errors.Wrap(err, errGetComposition)
	}
	apiVersion, kind := xr.GroupVersionKind().ToAPIVersionAndKind()
	var names []string
	template := ""
	for i := range list.Items {
		comp := &list.Items[i]
		if comp.Spec.CompositeTypeRef.APIVersion != apiVersion || comp.Spec.CompositeTypeRef.Kind != kind {
			continue
		}
		t := comp.GetAnnotations()[infrav1.ProviderIDAnnotation]
		if t == "" || (template != "" && t != template) {
			return "", "", nil
		}
		template = t
		names = append(names, comp.GetName())
	}
	slices.Sort(names)
	switch len(names) {
	case 0:
		return "", "", nil
	case 1:
		return template, "Composition " + names[0], nil
	}
	return template, fmt.Sprintf("Compositions %s", strings.Join(names, ", ")), nil
}
