package controllers

// What the bridge writes, and how: the one deferred write of an XR's
// reconcile (its metadata and spec, its contract status, its owner's verdict,
// its events), and the helpers every controller here writes through: a merge
// patch sent only when it changes something, a server-side apply of only the
// status fields and conditions the bridge owns.

import (
	"context"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/readiness"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/apply"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/composed"
)

// write sends what the reconcile decided, each part only when it differs
// from what is stored: one merge patch of the XR's metadata and spec, one
// server-side apply of its contract status fields, one of the owner's
// condition; then the events.
func (r *xrReconciler) write(ctx context.Context, s *scope) error {
	var errs []error
	gen := s.before.GetGeneration()
	mirrorOnly := s.mirror != nil && equality.Semantic.DeepEqual(s.mirror.Object["spec"], s.XR.Object["spec"])
	kind := s.XR.GetKind()
	rv := s.before.GetResourceVersion()
	// The working copy is what is wanted: no copy of it to mutate.
	if err := patchTo(ctx, r.client, &r.memory, s.before, &unstructured.Unstructured{Object: s.XR.Object}); err != nil {
		// Nothing else is written on a stale read.
		return err
	}
	if s.before.GetResourceVersion() != rv {
		writes.WithLabelValues(targetXR, kind).Inc()
	}
	if mirrorOnly && s.before.GetGeneration() != gen && s.observed != 0 {
		r.memory.mirrored(s.XR.GetUID(), readiness.Mirror{From: s.observed, To: s.before.GetGeneration()})
	}
	if s.status != nil {
		made, err := s.status.apply(ctx, r.client, &s.XR.Unstructured)
		if err == nil && made != "" {
			r.memory.record(s.before, made, partProvisioned, "true")
			writes.WithLabelValues(targetXRStatus, kind).Inc()
			observeProvisioned(kind, s.readySince, time.Now())
		}
		errs = append(errs, err)
	}
	if s.verdict != nil && s.Owner != nil {
		errs = append(errs, r.writeVerdict(ctx, s))
	}
	for _, e := range s.Events {
		r.recorder.Eventf(s.XR, nil, e.Type, e.Reason, actionReconcile, "%s", e.Message)
	}
	return kerrors.NewAggregate(errs)
}

// writeVerdict applies the verdict as the owner's
// CrossplaneInfrastructureReady condition when it says something new, and
// records the change as an event on the XR.
func (r *xrReconciler) writeVerdict(ctx context.Context, s *scope) error {
	old, found := ownerCondition(s.Owner, r.contract.ConditionType())
	if found && s.verdict.Same(&old) {
		// The verdict is about the XR: a new generation of the owner (CAPI
		// copying providerID or the bootstrap data secret name into its
		// spec) that leaves it as it was is not written again.
		return nil
	}
	if !found && s.verdict.Shown() {
		// CAPI's own conditions say it already; the condition appears with
		// the first verdict they do not, and follows every verdict after.
		return nil
	}
	c := s.verdict.Condition(s.Owner.GetGeneration())
	c.Type = r.contract.ConditionType()
	if r.memory.already(s.Owner, partVerdict, verdictValue(c)) {
		// The cache has not caught up with this very write yet: it was
		// sent, and its event recorded, already.
		return nil
	}
	// Converted only to be written: most reconciles write no verdict.
	owner, err := apply.ToUnstructured(r.client, s.Owner)
	if err != nil {
		return errors.Wrap(err, errWriteOwner)
	}
	st := &statusApply{}
	st.condition(owner, c)
	made, err := st.apply(ctx, r.client, owner)
	if err != nil {
		return errors.Wrap(err, errWriteOwner)
	}
	// Only a verdict someone must act on becomes an event too; progress is
	// the condition's to say (and Provisioned, once, the XR's).
	if (!found || !s.verdict.Same(&old)) && s.verdict.Warning() {
		r.recorder.Eventf(s.XR, nil, corev1.EventTypeWarning, s.verdict.Reason, actionReconcile, "%s", s.verdict.Message)
	}
	r.memory.record(s.Owner, made, partVerdict, verdictValue(c))
	if made != "" {
		writes.WithLabelValues(targetOwnerCondition, s.XR.GetKind()).Inc()
		verdicts.WithLabelValues(c.Reason, s.XR.GetKind()).Inc()
	}
	return nil
}

// ownerCondition is the bridge's condition of a type on a CAPI owner, read
// from the typed object.
func ownerCondition(owner client.Object, typ string) (metav1.Condition, bool) {
	g, ok := owner.(conditions.Getter)
	if !ok {
		return metav1.Condition{}, false
	}
	c := conditions.Get(g, typ)
	if c == nil {
		return metav1.Condition{}, false
	}
	return *c, true
}

// fieldManager is the bridge's server-side apply field manager.
const fieldManager = composed.FieldManager

const (
	errApplyStatus = "cannot apply the bridge's status fields"
	errPatch       = "cannot patch object"
)

// statusApply is what the bridge owns of an object's status: some fields and
// some condition types. Nothing else is sent, so Crossplane's and CAPI's own
// status fields are never touched.
type statusApply struct {
	fields     map[string]any
	conditions []metav1.Condition
}

// condition sets a condition the bridge owns. Its transition time is kept
// from the object when the status did not change, so a condition only moves
// when its meaning does.
func (s *statusApply) condition(obj *unstructured.Unstructured, c metav1.Condition) {
	// apimachinery's rule: the transition time moves only with the status.
	var conds []metav1.Condition
	if old, ok := findCondition(obj, c.Type); ok {
		conds = append(conds, old)
	}
	meta.SetStatusCondition(&conds, c)
	s.conditions = append(s.conditions, conds[0])
}

// changed reports whether applying s would change obj.
func (s *statusApply) changed(obj *unstructured.Unstructured) bool {
	for path, want := range s.fields {
		got, found, _ := unstructured.NestedFieldNoCopy(obj.Object, splitPath(path)...)
		if !found || got != want {
			return true
		}
	}
	for _, want := range s.conditions {
		got, ok := findCondition(obj, want.Type)
		if !ok || got.Status != want.Status || got.Reason != want.Reason || got.Message != want.Message || got.ObservedGeneration != want.ObservedGeneration {
			return true
		}
	}
	return false
}

// apply writes s to obj's status subresource with server-side apply, only if
// it changes anything, and returns the resourceVersion the write made (empty
// when nothing was sent).
func (s *statusApply) apply(ctx context.Context, c client.Client, obj *unstructured.Unstructured) (string, error) {
	if !s.changed(obj) {
		return "", nil
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(obj.GetAPIVersion())
	u.SetKind(obj.GetKind())
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	for path, v := range s.fields {
		if err := unstructured.SetNestedField(u.Object, v, splitPath(path)...); err != nil {
			return "", errors.Wrap(err, errApplyStatus)
		}
	}
	if len(s.conditions) > 0 {
		sort.Slice(s.conditions, func(i, j int) bool { return s.conditions[i].Type < s.conditions[j].Type })
		cs := make([]any, 0, len(s.conditions))
		for _, c := range s.conditions {
			m, err := runtimeToUnstructured(c)
			if err != nil {
				return "", errors.Wrap(err, errApplyStatus)
			}
			cs = append(cs, m)
		}
		if err := unstructured.SetNestedSlice(u.Object, cs, "status", "conditions"); err != nil {
			return "", errors.Wrap(err, errApplyStatus)
		}
	}
	ctrl.LoggerFrom(ctx).V(4).Info("Applying status", "kind", obj.GetKind(), "name", obj.GetName(), "status", u.Object["status"])
	if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return "", errors.Wrap(err, errApplyStatus)
	}
	// The server's answer is the whole object as written.
	return u.GetResourceVersion(), nil
}

// findCondition reads a condition of an unstructured object with CAPI's
// reader (status.conditions, or a v1beta1 object's status.v1beta2.conditions).
func findCondition(obj *unstructured.Unstructured, t string) (metav1.Condition, bool) {
	c, err := conditions.UnstructuredGet(obj, t)
	if err != nil || c == nil {
		return metav1.Condition{}, false
	}
	return *c, true
}

func splitPath(p string) []string { return strings.Split(p, ".") }

func runtimeToUnstructured(c metav1.Condition) (map[string]any, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
}

// patchIfChanged applies mutate to a copy of obj and, if that changed
// anything, sends the difference as a merge patch under the bridge's field
// manager. On success obj holds the result. A merge patch replaces a list
// whole, so a patch that changes the finalizers is guarded by obj's resource
// version, and so is one that holds, releases or pauses it; one that sets
// only other map keys (annotations, spec fields the bridge owns) is not, and a status write someone made since the read does not
// make it fail. With w, a patch is not sent again over a cache that does not
// show it yet (a reconcile woken by another kind's informer may read the
// object from one behind): what it writes is already there.
func patchIfChanged(ctx context.Context, c client.Client, w *memory, obj *unstructured.Unstructured, mutate func(*unstructured.Unstructured)) error {
	want := obj.DeepCopy()
	mutate(want)
	return patchTo(ctx, c, w, obj, want)
}

// pauseChanged reports whether want holds, releases or pauses obj: a
// decision taken on obj as read, which must not land on a newer version
// (one whose credentials reference a tenant changed since).
func pauseChanged(obj, want *unstructured.Unstructured) bool {
	a, b := obj.GetAnnotations(), want.GetAnnotations()
	for _, k := range []string{infrav1.CrossplanePausedAnnotation, infrav1.CredentialsHoldAnnotation} {
		if a[k] != b[k] {
			return true
		}
	}
	return false
}

// patchTo is patchIfChanged for a caller that holds the object it wants
// already: want, which the patch's answer overwrites.
func patchTo(ctx context.Context, c client.Client, w *memory, obj, want *unstructured.Unstructured) error {
	if equality.Semantic.DeepEqual(obj.Object, want.Object) {
		return nil
	}
	var opts []client.MergeFromOption
	if !equality.Semantic.DeepEqual(obj.GetFinalizers(), want.GetFinalizers()) || pauseChanged(obj, want) {
		opts = append(opts, client.MergeFromWithOptimisticLock{})
	}
	patch := client.MergeFromWithOptions(obj, opts...)
	data, err := patch.Data(want)
	if err != nil {
		return errors.Wrap(err, errPatch)
	}
	if w != nil && w.already(obj, partPatch, string(data)) {
		return nil
	}
	ctrl.LoggerFrom(ctx).V(4).Info("Patching", "kind", obj.GetKind(), "name", obj.GetName(), "patch", string(data))
	if err := c.Patch(ctx, want, patch, client.FieldOwner(fieldManager)); err != nil {
		return errors.Wrap(err, errPatch)
	}
	if w != nil {
		w.record(obj, want.GetResourceVersion(), partPatch, string(data))
	}
	obj.Object = want.Object
	return nil
}
