// Package composed is what an XR composed, behind one interface: resources
// another controller owns (Crossplane composes them, a provider reconciles
// them), which the bridge reads once per reconcile and then pauses for
// credentials, guards for clusterctl move, labels for move and deletes, but
// never reconciles. It is the seam crossplane-runtime's ExternalClient and
// CAPZ's ASO services draw around a system the reconciler does not own, and
// the reconciler's tests fake it.
package composed

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kmeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

const (
	errGetComposed    = "cannot get composed resource"
	errDeleteComposed = "cannot delete composed resource"
	errWatchComposed  = "cannot watch composed resources"
	errMapComposed    = "cannot map composed kind to its CRD"
	errGetXRD         = "cannot get CompositeResourceDefinition"
	errHold           = "cannot pause composed resource whose credentials may not be used"
	errResume         = "cannot resume composed resource"
	errGuard          = "cannot guard composed resource for clusterctl move"
	errUnguard        = "cannot remove the move guard from composed resource"

	// MaxNesting bounds how deep the bridge follows composed XRs.
	MaxNesting = 8
	// MaxComposed bounds how many composed resources, nested XRs'
	// included, the bridge follows for one XR.
	MaxComposed        = 4096
	errTooManyComposed = "the XR's resource references name more than %d composed resources, nested XRs' included: the bridge follows no more"

	annotationTrue = "true"
)

// Tree is what one XR composed, as read once by Observe. Hold, Guard and
// Delete patch its objects in place, so that what a reconcile does after
// them sees what it wrote.
type Tree struct {
	// Own are the resources the XR itself controls through its resource
	// references, All those and, down to MaxNesting levels, every resource
	// its composed XRs control; each once.
	Own, All []*metav1.PartialObjectMetadata
	// Foreign are the references of the XR itself the bridge does not
	// follow (Kind/name, sorted): another namespace's, a cluster-scoped or
	// unknown kind, a kind the bridge may not read, or a resource the XR
	// does not control.
	Foreign []string
}

// Empty says whether the XR composed nothing the bridge follows.
func (t *Tree) Empty() bool { return t == nil || len(t.All) == 0 }

// OwnNames names the resources the XR itself controls (Kind/name, sorted).
func (t *Tree) OwnNames() []string {
	if t == nil {
		return nil
	}
	names := make([]string, 0, len(t.Own))
	for _, obj := range t.Own {
		names = append(names, obj.Kind+"/"+obj.GetName())
	}
	sort.Strings(names)
	return names
}

// Resources acts on what XRs composed.
type Resources interface {
	// Observe reads every resource the XR controls (metadata only),
	// nested XRs' included, watching their kinds so that their changes
	// wake the XR's reconciler. An XR without resource references costs no
	// read.
	Observe(ctx context.Context, xr *composite.Unstructured) (*Tree, error)
	// Hold pauses (on) every resource of the tree, marked as the
	// credentials' hold, when the XR's credentials may not be used; off
	// lifts only that hold.
	Hold(ctx context.Context, t *Tree, on bool) error
	// Guard adds (on) or removes the move guard on every resource of the
	// tree.
	Guard(ctx context.Context, t *Tree, on bool) error
	// LabelCRDs gives the CRDs of the tree's kinds clusterctl's label; it
	// returns one error per CRD it could not label.
	LabelCRDs(ctx context.Context, t *Tree) []error
	// Delete deletes the resources the XR itself controls, their move
	// guards first. Those still exist until their watch says they are
	// gone (Tree.OwnNames).
	Delete(ctx context.Context, t *Tree) error
}

// Watcher starts a watch once per kind, as the bridge learns of kinds: CAPI's
// external.ObjectTracker.
type Watcher interface {
	Watch(log logr.Logger, obj client.Object, h handler.EventHandler, p ...predicate.Predicate) error
}

// Labeller labels the CRDs of composed kinds for clusterctl move.
type Labeller interface {
	// Done says whether the CRD of a kind is known to carry the label, or
	// to need none.
	Done(gvk schema.GroupVersionKind) bool
	// Label labels the CRD of a kind whose resources clusterctl may move.
	Label(ctx context.Context, gvk schema.GroupVersionKind) error
}

// MissingAccess names the verbs the bridge lacks on a resource, none when it
// may get, list and watch it.
type MissingAccess func(ctx context.Context, gr schema.GroupResource) ([]string, error)

// New returns the Resources of the XRs of kind xr on the API server c
// reads, whose reads of a kind the bridge lacks access to are refused by
// missing.
func New(c client.Client, xr schema.GroupVersionKind, w Watcher, missing MissingAccess, l Labeller, opts ...Option) Resources {
	a := &api{client: c, kind: xr, tracker: w, missing: missing, labels: l, nested: map[schema.GroupKind]schema.GroupVersionKind{}}
	for _, o := range opts {
		o(a)
	}
	return a
}

// An Option configures Resources.
type Option func(*api)

// WithAdapted says which kinds' XRs the bridge holds and releases for their
// own credentials: an XR of such a kind in the tree (a tenant may give one
// of its XRs a controller reference to another) keeps its own hold when
// the XR whose tree it is in is released.
func WithAdapted(adapted func(schema.GroupKind) bool) Option {
	return func(a *api) { a.adapted = adapted }
}

type api struct {
	client  client.Client
	kind    schema.GroupVersionKind
	tracker Watcher
	missing MissingAccess
	labels  Labeller
	// adapted reports the kinds whose XRs hold for their own credentials.
	adapted func(schema.GroupKind) bool

	// nested are the kinds of the XRs Observe found composed, as it read
	// them: a composed resource's event wakes the XR it belongs to through
	// them (xrsOf).
	mu     sync.RWMutex
	nested map[schema.GroupKind]schema.GroupVersionKind
}

// Observe walks the XR's resource references, and those of the XRs it
// composed, down to MaxNesting levels, each resource once: resource
// references are tenant-written, and an XR whose references name itself,
// or the same XR many times, must not grow the walk (a visited set by UID),
// nor may a long list (at most MaxComposed resources, past which the walk
// is an error).
func (a *api) Observe(ctx context.Context, xr *composite.Unstructured) (*Tree, error) {
	t := &Tree{}
	if len(xr.GetResourceReferences()) == 0 {
		return t, nil
	}
	visited := map[types.UID]bool{xr.GetUID(): true}
	level := []*composite.Unstructured{xr}
	for depth := 0; len(level) > 0 && depth < MaxNesting; depth++ {
		var next []*composite.Unstructured
		for _, x := range level {
			controlled, foreign, err := a.controlled(ctx, x)
			if err != nil {
				return nil, err
			}
			if depth == 0 {
				t.Own, t.Foreign = controlled, foreign
			}
			for _, obj := range controlled {
				if visited[obj.GetUID()] {
					continue
				}
				visited[obj.GetUID()] = true
				if len(t.All) == MaxComposed {
					return nil, errors.Errorf(errTooManyComposed, MaxComposed)
				}
				t.All = append(t.All, obj)
				if a.adapted != nil && a.adapted(obj.GroupVersionKind().GroupKind()) {
					// An XR the bridge holds for its own credentials: what it
					// composed is its own reconcile's to hold and release.
					continue
				}
				nested, err := a.nestedXR(ctx, obj)
				if err != nil {
					return nil, err
				}
				if nested != nil {
					next = append(next, nested)
				}
			}
		}
		level = next
	}
	return t, nil
}

// controlled reads the composed resources the XR names and controls, and
// names those it names but does not control, or may not read. Anyone who
// may write the XR may write its resource references: a reference is data,
// not an instruction, so one the bridge may not or cannot read is not read
// at all, and is named as not controlled whether or not such an object
// exists.
func (a *api) controlled(ctx context.Context, xr *composite.Unstructured) (controlled []*metav1.PartialObjectMetadata, foreign []string, err error) {
	log := ctrl.LoggerFrom(ctx)
	for _, ref := range xr.GetResourceReferences() {
		why, err := a.unreadable(ctx, xr, ref)
		if err != nil {
			return nil, nil, err
		}
		if why != "" {
			log.V(4).Info("Not reading a resource reference", "kind", ref.Kind, "name", ref.Name, "why", why)
			foreign = append(foreign, ref.Kind+"/"+ref.Name)
			continue
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
		if err := a.tracker.Watch(log, obj, handler.EnqueueRequestsFromMapFunc(a.xrsOf), actedOn); err != nil {
			return nil, nil, errors.Wrap(err, errWatchComposed)
		}
		if err := a.client.Get(ctx, types.NamespacedName{Namespace: xr.GetNamespace(), Name: ref.Name}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, nil, errors.Wrapf(err, "%s %s %s", errGetComposed, ref.Kind, ref.Name)
		}
		// Only what this XR controls is its to delete, guard or pause.
		if c := metav1.GetControllerOf(obj); c == nil || c.UID != xr.GetUID() {
			foreign = append(foreign, ref.Kind+"/"+ref.Name)
			continue
		}
		controlled = append(controlled, obj)
	}
	sort.Strings(foreign)
	return controlled, foreign, nil
}

// xrsOf maps a composed resource to the XRs of the reconciler's kind it
// belongs to: its controller, and up the controllers of the nested XRs that
// composed it, MaxNesting levels at most. One handler serves every composed
// kind, whichever XR's walk started its watch (the tracker keeps the first
// handler of a kind): a resource a nested XR composed wakes the XR at the
// top of the tree, which observes, holds and guards it. The walk reads only
// XRs of kinds Observe already read, from the cache.
func (a *api) xrsOf(ctx context.Context, obj client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	ref := metav1.GetControllerOf(obj)
	for depth := 0; ref != nil && depth <= MaxNesting; depth++ {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return reqs
		}
		gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
		gvk, ok := a.nestedKind(gk)
		if gk == a.kind.GroupKind() {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}})
			gvk, ok = a.kind, true
		}
		if !ok {
			return reqs
		}
		parent := &unstructured.Unstructured{}
		parent.SetGroupVersionKind(gvk)
		if err := a.client.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}, parent); err != nil || parent.GetUID() != ref.UID {
			return reqs
		}
		ref = metav1.GetControllerOf(parent)
	}
	return reqs
}

func (a *api) nestedKind(gk schema.GroupKind) (schema.GroupVersionKind, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	gvk, ok := a.nested[gk]
	return gvk, ok
}

// actedOn passes the changes of a composed resource the bridge reads:
// whether it exists, its controller, its deletion, and the metadata the
// bridge itself writes on it (watchedAnnotations, watchedLabels, the move
// guard), so that a pause, hold or guard someone else lifts is restored.
// The rest is not the bridge's: a provider writes its resources' status
// on every poll, and its own annotations (external name, create pending
// and succeeded) and finalizer as it creates them; Crossplane reflects
// what matters of them in the XR, whose own watch wakes the bridge.
var actedOn = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, n := e.ObjectOld, e.ObjectNew
	if o == nil || n == nil {
		return true
	}
	return changed(o.GetAnnotations(), n.GetAnnotations(), watchedAnnotations) ||
		changed(o.GetLabels(), n.GetLabels(), watchedLabels) ||
		controllerutil.ContainsFinalizer(o, infrav1.MoveGuardFinalizer) != controllerutil.ContainsFinalizer(n, infrav1.MoveGuardFinalizer) ||
		!equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) ||
		!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
}}

// The annotations and labels of a composed resource the bridge reads and
// writes: Crossplane's pause and what paused it (the credentials' hold, a
// move), and the mark of revoked credentials.
var (
	watchedAnnotations = []string{infrav1.CrossplanePausedAnnotation, infrav1.CredentialsHoldAnnotation, infrav1.PausedForMoveAnnotation}
	watchedLabels      = []string{infrav1.CredentialsRevokedLabel}
)

// changed says whether any of keys was added, removed or changed.
func changed(o, n map[string]string, keys []string) bool {
	for _, k := range keys {
		ov, oOK := o[k]
		nv, nOK := n[k]
		if oOK != nOK || ov != nv {
			return true
		}
	}
	return false
}

// unreadable says why the bridge does not read a resource reference, or ""
// when it may: namespaced XRs compose only namespaced resources of their
// own namespace, of kinds the API serves and the bridge may get, list and
// watch (the cache's informer for a kind it may not list would never sync,
// holding the worker that reads it).
func (a *api) unreadable(ctx context.Context, xr *composite.Unstructured, ref corev1.ObjectReference) (string, error) {
	if ref.Namespace != "" && ref.Namespace != xr.GetNamespace() {
		return "it is in another namespace", nil
	}
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	m, err := a.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if kmeta.IsNoMatchError(err) {
		return "the API serves no such kind", nil
	}
	if err != nil {
		return "", errors.Wrapf(err, "%s %s", errMapComposed, gvk)
	}
	if m.Scope.Name() != kmeta.RESTScopeNameNamespace {
		return "it is cluster-scoped", nil
	}
	missing, err := a.missing(ctx, m.Resource.GroupResource())
	if err != nil {
		return "", err
	}
	if len(missing) > 0 {
		return fmt.Sprintf("the bridge may not %s: grant it with a ClusterRole labelled capxp.dev/aggregate-to-manager: \"true\"", strings.Join(missing, ", ")), nil
	}
	return "", nil
}

// nestedXR reads a composed resource as an XR when an XRD defines its kind;
// nil when none does.
func (a *api) nestedXR(ctx context.Context, obj *metav1.PartialObjectMetadata) (*composite.Unstructured, error) {
	gvk := obj.GroupVersionKind()
	m, err := a.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, errors.Wrapf(err, "%s %s", errMapComposed, gvk)
	}
	x := &xpextv2.CompositeResourceDefinition{}
	if err := a.client.Get(ctx, client.ObjectKey{Name: m.Resource.Resource + "." + gvk.Group}, x); err != nil {
		return nil, errors.Wrap(client.IgnoreNotFound(err), errGetXRD)
	}
	xr := composite.New(composite.WithGroupVersionKind(gvk))
	if err := a.client.Get(ctx, client.ObjectKeyFromObject(obj), &xr.Unstructured); err != nil {
		return nil, errors.Wrapf(client.IgnoreNotFound(err), "%s %s %s", errGetComposed, gvk.Kind, obj.GetName())
	}
	if _, ok := a.nestedKind(gvk.GroupKind()); !ok {
		a.mu.Lock()
		a.nested[gvk.GroupKind()] = gvk
		a.mu.Unlock()
	}
	return xr, nil
}

// Hold pauses what the XR composed while its credentials may not be used:
// pausing the XR stops Crossplane composing anything new, but what it
// composed already keeps running with the credentials until its own
// reconciliation is paused. Each one paused this way is marked, and resumed
// once the credentials may be used again; a pause of anyone else's stays.
func (a *api) Hold(ctx context.Context, t *Tree, on bool) error {
	if t == nil {
		return nil
	}
	for _, obj := range t.All {
		held := obj.GetAnnotations()[infrav1.CredentialsHoldAnnotation] == annotationTrue
		orig := obj.DeepCopy()
		switch {
		case on && !held && !meta.IsPaused(obj):
			meta.AddAnnotations(obj, map[string]string{infrav1.CrossplanePausedAnnotation: annotationTrue, infrav1.CredentialsHoldAnnotation: annotationTrue})
		case !on && held && a.adapted != nil && a.adapted(obj.GroupVersionKind().GroupKind()):
			// An XR held for its own credentials: its own reconcile
			// releases it, once they may be used.
			continue
		case !on && held:
			LiftPause(obj, infrav1.CredentialsHoldAnnotation)
		default:
			continue
		}
		msg := errHold
		if !on {
			msg = errResume
		}
		if err := a.patch(ctx, obj, orig); err != nil {
			return errors.Wrapf(err, "%s %s %s", msg, obj.Kind, obj.GetName())
		}
		if on {
			ctrl.LoggerFrom(ctx).Info("Paused composed resource: its composite resource's credentials may not be used", "kind", obj.Kind, "name", obj.GetName())
		}
	}
	return nil
}

// Guard adds (on) or removes the move guard on every resource of the tree:
// clusterctl moves them all.
func (a *api) Guard(ctx context.Context, t *Tree, on bool) error {
	if t == nil {
		return nil
	}
	for _, obj := range t.All {
		if err := a.guard(ctx, obj, on); err != nil {
			return err
		}
	}
	return nil
}

// guard adds (on) or removes the move guard on one composed resource. The
// guard is a finalizer and a pause: a resource not paused already is
// paused, and marked as paused by the guard, which alone lifts that pause.
func (a *api) guard(ctx context.Context, obj *metav1.PartialObjectMetadata, on bool) error {
	finalized := controllerutil.ContainsFinalizer(obj, infrav1.MoveGuardFinalizer)
	_, marked := obj.GetAnnotations()[infrav1.PausedForMoveAnnotation]
	if (on && finalized && meta.IsPaused(obj)) || (!on && !finalized && !marked) {
		return nil
	}
	orig := obj.DeepCopy()
	msg := errUnguard
	if on {
		controllerutil.AddFinalizer(obj, infrav1.MoveGuardFinalizer)
		if !meta.IsPaused(obj) {
			meta.AddAnnotations(obj, map[string]string{meta.AnnotationKeyReconciliationPaused: annotationTrue, infrav1.PausedForMoveAnnotation: ""})
		}
		msg = errGuard
	} else {
		controllerutil.RemoveFinalizer(obj, infrav1.MoveGuardFinalizer)
		if marked {
			LiftPause(obj, infrav1.PausedForMoveAnnotation)
		}
	}
	return errors.Wrapf(a.patch(ctx, obj, orig), "%s %s %s", msg, obj.Kind, obj.GetName())
}

// patch sends what changed with the resourceVersion read: finalizers and
// annotations are written by others too, and a hold, release or guard
// decided on a stale read conflicts and is decided again. One deleted
// meanwhile needs nothing more.
func (a *api) patch(ctx context.Context, obj, orig *metav1.PartialObjectMetadata) error {
	err := a.client.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(FieldManager))
	return client.IgnoreNotFound(err)
}

// FieldManager is the bridge's field manager.
const FieldManager = "capxp-bridge"

// LabelCRDs labels the CRD of every kind of the tree whose CRD is not known
// to carry the label. Only kinds of resources the XR controls are labelled:
// a tenant may write resource references, and must not have the bridge
// label any CRD it names.
func (a *api) LabelCRDs(ctx context.Context, t *Tree) []error {
	if t == nil || a.labels == nil {
		return nil
	}
	var errs []error
	seen := map[schema.GroupVersionKind]bool{}
	for _, obj := range t.All {
		gvk := obj.GroupVersionKind()
		if seen[gvk] || gvk.Group == "" || a.labels.Done(gvk) {
			continue
		}
		seen[gvk] = true
		if err := a.labels.Label(ctx, gvk); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Delete deletes the composed resources the XR controls, in the background;
// their watch wakes the bridge as they go, nothing polls. A move guard left
// on one goes first: this is a deletion, not a move, and the provider must
// delete what it manages.
func (a *api) Delete(ctx context.Context, t *Tree) error {
	if t == nil {
		return nil
	}
	for _, obj := range t.Own {
		if err := a.guard(ctx, obj, false); err != nil {
			return err
		}
		if obj.GetDeletionTimestamp().IsZero() {
			ctrl.LoggerFrom(ctx).Info("Deleting composed resource", "kind", obj.Kind, "name", obj.GetName())
			if err := client.IgnoreNotFound(a.client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))); err != nil {
				return errors.Wrapf(err, "%s %s %s", errDeleteComposed, obj.Kind, obj.GetName())
			}
		}
	}
	return nil
}

// LiftPause removes a pause the bridge set on a composed resource for one
// reason (marker): the pause goes with it, unless the resource is also
// paused because the credentials it names were revoked; that pause then
// stays, the revocation's to lift.
func LiftPause(obj metav1.Object, marker string) {
	meta.RemoveAnnotations(obj, marker)
	if obj.GetLabels()[infrav1.CredentialsRevokedLabel] != "" {
		meta.AddLabels(obj, map[string]string{infrav1.CredentialsRevokedLabel: infrav1.CredentialsRevokedPaused})
		return
	}
	if marker != infrav1.CredentialsHoldAnnotation && obj.GetAnnotations()[infrav1.CredentialsHoldAnnotation] == annotationTrue {
		// Also held for credentials: that pause is the hold's to lift.
		return
	}
	meta.RemoveAnnotations(obj, infrav1.CrossplanePausedAnnotation)
}
