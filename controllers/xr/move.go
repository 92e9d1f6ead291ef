package xr

import (
	"context"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	corev1 "k8s.io/api/core/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/apply"
)

// What `clusterctl move` needs of an adapted XR and what it composed
// (docs/move.md):
//   - clusterctl moves only kinds whose CRDs carry its label: the bridge
//     labels the CRDs of every kind an XR composes, as soon as it composes;
//   - clusterctl deletes every moved object in the source, then removes its
//     finalizers: a paused XR's composed resources carry the move guard, so
//     that their provider, still running in the source, deletes nothing;
//   - clusterctl waits for the block-move annotation to go after it has
//     paused the clusters: the bridge removes it from a paused XR only once
//     every composed resource is guarded; once the XR is unpaused (in the
//     target, after the move) it removes the guards, and the annotation
//     comes back.

const (
	errLabelCRD    = "cannot label the CRD of a composed kind for clusterctl move"
	errMapComposed = "cannot map composed kind to its CRD"
	moveFieldOwner = "capxp-move"
)

// blockMove keeps an unpaused XR that composed something out of clusterctl
// move's reach, with the block-move annotation, and labels the CRDs of the
// kinds it composes. clusterctl notes which objects carry the annotation
// when it discovers what to move, before it pauses anything, and waits only
// for those. The annotation comes with a write the XR gets anyway, and at
// the latest once the XR is provisioned (due): clusterctl moves only
// clusters whose infrastructure is provisioned and whose Machines have
// nodes, so an XR not yet provisioned cannot be moved, and a machine costs
// no write of its own for the annotation.
func (r *xrReconciler) blockMove(ctx context.Context, s *scope, due bool) {
	if len(s.XR.GetResourceReferences()) == 0 {
		return
	}
	r.labelComposedCRDs(ctx, s)
	if _, ok := s.XR.GetAnnotations()[infrav1.BlockMoveAnnotation]; ok {
		return
	}
	if due || !equality.Semantic.DeepEqual(s.before.Object, s.XR.Object) {
		meta.AddAnnotations(s.XR, map[string]string{infrav1.BlockMoveAnnotation: ""})
	}
}

// labelComposedCRDs gives the CRD of every kind the XR composes, nested XRs'
// kinds included, clusterctl's label, so that `clusterctl move` finds (and
// moves) the composed resources with their XR. A CRD it cannot label is an
// event on the XR, not a reason to stop reconciling it: the XR keeps its
// block-move annotation, so a move waits and refuses rather than leave
// resources behind.
func (r *xrReconciler) labelComposedCRDs(ctx context.Context, s *scope) {
	for _, err := range r.composed.LabelCRDs(ctx, s.tree) {
		s.Event(corev1.EventTypeWarning, "MoveBlocked", err.Error())
		meta.AddAnnotations(s.XR, map[string]string{infrav1.BlockMoveAnnotation: ""})
	}
}

// crdLabels labels CRDs for the XRs of every kind, one at a time: XRs
// reconciled at once compose the same kinds, and would each find a CRD's
// label missing in the cache and apply it.
type crdLabels struct {
	mu      sync.Mutex
	written memory
	// labelled are the kinds whose CRDs carry the label (or have none):
	// their references cost no walk of the composed resources.
	labelled sync.Map
	// categories lists the categories of a group version's kinds, by
	// kind (discovery); nil labels no CRD.
	categories func(gv schema.GroupVersion) (map[string][]string, error)
	catMu      sync.Mutex
	cats       map[schema.GroupVersion]map[string][]string
}

// Crossplane's categories of the kinds it composes: managed resources and
// composite resources (nested XRs).
const (
	categoryManaged   = "managed"
	categoryComposite = "composite"
)

// movable is true for a kind whose CRD clusterctl move may be told to
// follow: a managed resource's or a composite resource's. A tenant can
// create an object of another kind (a ProviderConfig, say), give it a
// controller reference to its own XR and name it in the XR's
// resourceRefs; labelling that kind's CRD would have clusterctl move every
// namespace's objects of it.
func (l *crdLabels) movable(gvk schema.GroupVersionKind) (bool, error) {
	if l.categories == nil {
		return false, nil
	}
	l.catMu.Lock()
	defer l.catMu.Unlock()
	byKind, ok := l.cats[gvk.GroupVersion()]
	if _, known := byKind[gvk.Kind]; !ok || !known {
		// New, or a kind served since the group version was read.
		var err error
		if byKind, err = l.categories(gvk.GroupVersion()); err != nil {
			return false, err
		}
		if l.cats == nil {
			l.cats = map[schema.GroupVersion]map[string][]string{}
		}
		l.cats[gvk.GroupVersion()] = byKind
	}
	cs := byKind[gvk.Kind]
	return slices.Contains(cs, categoryManaged) || slices.Contains(cs, categoryComposite), nil
}

func (l *crdLabels) label(ctx context.Context, c client.Client, name string, want map[string]string, owner string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return apply.LabelCRD(ctx, c, &l.written, name, want, owner)
}

// done reports whether the CRD of a kind is known to carry the label.
func (l *crdLabels) done(gvk schema.GroupVersionKind) bool {
	_, ok := l.labelled.Load(gvk.GroupKind())
	return ok
}

// crdLabeller labels the CRDs of composed kinds with c, once per kind for
// every XR kind's reconciler (composed.Labeller). It reads the CRDs from the
// cache and writes only a missing label, server-side under its own field
// manager, which the apply of whoever installed the CRD (Crossplane's
// package manager, clusterctl) leaves alone. A composed kind that no CRD
// defines (a core kind) has nothing to label.
type crdLabeller struct {
	client client.Client
	labels *crdLabels
}

func (l crdLabeller) Done(gvk schema.GroupVersionKind) bool { return l.labels.done(gvk) }

// Label gives the CRD of a kind clusterctl's label, when it is a managed or
// a composite resource's (crdLabels.movable).
func (l crdLabeller) Label(ctx context.Context, gvk schema.GroupVersionKind) error {
	movable, err := l.labels.movable(gvk)
	if err != nil {
		return err
	}
	if !movable {
		ctrl.LoggerFrom(ctx).V(4).Info("Not labelling the CRD of a composed kind that is neither a managed nor a composite resource", "kind", gvk.String())
		return nil
	}
	m, err := l.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return errors.Wrapf(err, "%s %s", errMapComposed, gvk)
	}
	name := m.Resource.Resource + "." + gvk.Group
	labelled, err := l.labels.label(ctx, l.client, name, map[string]string{infrav1.ClusterctlLabel: ""}, moveFieldOwner)
	if apierrors.IsNotFound(err) {
		l.labels.labelled.Store(gvk.GroupKind(), true)
		return nil
	}
	if err != nil {
		return errors.Wrapf(err, "%s %s", errLabelCRD, gvk.Kind)
	}
	l.labels.labelled.Store(gvk.GroupKind(), true)
	if labelled {
		ctrl.LoggerFrom(ctx).Info("Labelled the CRD of a composed kind for clusterctl move", "CustomResourceDefinition", name)
	}
	return nil
}
