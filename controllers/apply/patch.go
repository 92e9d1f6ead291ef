package apply

// The writes the reconcilers share for the objects they maintain in part:
// a merge patch sent only when it changes something, a server-side apply of
// only the status fields and conditions the bridge owns, the labels a CRD
// lacks. Each is sent once: with a Written, not again over a cache that does
// not show it yet.

import (
	"context"
	"maps"
	"sort"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/composed"
)

// Written remembers what a writer sent, by object and part, so that a
// reconcile reading a cache that does not show a write yet does not send it
// again.
type Written interface {
	// Already reports whether value was written as obj's part over a
	// version of obj no newer than the one given.
	Already(obj metav1.Object, part, value string) bool
	// Record notes that value was written as obj's part over obj as read,
	// making version made.
	Record(obj metav1.Object, made, part, value string)
}

// The parts of objects the writes here record.
const (
	// PartPatch is what PatchTo sent.
	PartPatch = "patch"
	// PartLabels is what LabelCRD applied.
	PartLabels = "labels"
)

// errGetCRD is the error of a CRD that cannot be read.
const errGetCRD = "cannot get CustomResourceDefinition"

const (
	errApplyStatus = "cannot apply the bridge's status fields"
	errPatch       = "cannot patch object"
)

// StatusApply is what the bridge owns of an object's status: some fields and
// some condition types. Nothing else is sent, so Crossplane's and CAPI's own
// status fields are never touched.
type StatusApply struct {
	// Fields are the status fields the bridge owns, by dotted path
	// (crossplane-runtime's fieldpath).
	Fields     map[string]any
	conditions []metav1.Condition
}

// Condition sets a condition the bridge owns. Its transition time is kept
// from the object when the status did not change, so a condition only moves
// when its meaning does.
func (s *StatusApply) Condition(obj *unstructured.Unstructured, c metav1.Condition) {
	// apimachinery's rule: the transition time moves only with the status.
	var conds []metav1.Condition
	if old, ok := FindCondition(obj, c.Type); ok {
		conds = append(conds, old)
	}
	meta.SetStatusCondition(&conds, c)
	s.conditions = append(s.conditions, conds[0])
}

// Changed reports whether applying s would change obj.
func (s *StatusApply) Changed(obj *unstructured.Unstructured) bool {
	for path, want := range s.Fields {
		got, err := fieldpath.Pave(obj.Object).GetValue(path)
		if err != nil || got != want {
			return true
		}
	}
	for _, want := range s.conditions {
		got, ok := FindCondition(obj, want.Type)
		if !ok || got.Status != want.Status || got.Reason != want.Reason || got.Message != want.Message || got.ObservedGeneration != want.ObservedGeneration {
			return true
		}
	}
	return false
}

// Apply writes s to obj's status subresource with server-side apply, only if
// it changes anything, and returns the resourceVersion the write made (empty
// when nothing was sent).
func (s *StatusApply) Apply(ctx context.Context, c client.Client, obj *unstructured.Unstructured) (string, error) {
	if !s.Changed(obj) {
		return "", nil
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(obj.GetAPIVersion())
	u.SetKind(obj.GetKind())
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	for path, v := range s.Fields {
		if err := fieldpath.Pave(u.Object).SetValue(path, v); err != nil {
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
	if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(composed.FieldManager), client.ForceOwnership); err != nil {
		return "", errors.Wrap(err, errApplyStatus)
	}
	// The server's answer is the whole object as written.
	return u.GetResourceVersion(), nil
}

// FindCondition reads a condition of an unstructured object with CAPI's
// reader (status.conditions, or a v1beta1 object's status.v1beta2.conditions).
func FindCondition(obj *unstructured.Unstructured, t string) (metav1.Condition, bool) {
	c, err := conditions.UnstructuredGet(obj, t)
	if err != nil || c == nil {
		return metav1.Condition{}, false
	}
	return *c, true
}

func runtimeToUnstructured(c metav1.Condition) (map[string]any, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
}

// PatchIfChanged applies mutate to a copy of obj and, if that changed
// anything, sends the difference as a merge patch under the bridge's field
// manager. On success obj holds the result. A merge patch replaces a list
// whole, so a patch that changes the finalizers is guarded by obj's resource
// version, and so is one that holds, releases or pauses it; one that sets
// only other map keys (annotations, spec fields the bridge owns) is not, and a status write someone made since the read does not
// make it fail. With w, a patch is not sent again over a cache that does not
// show it yet (a reconcile woken by another kind's informer may read the
// object from one behind): what it writes is already there.
func PatchIfChanged(ctx context.Context, c client.Client, w Written, obj *unstructured.Unstructured, mutate func(*unstructured.Unstructured)) error {
	want := obj.DeepCopy()
	mutate(want)
	return PatchTo(ctx, c, w, obj, want)
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

// PatchTo is PatchIfChanged for a caller that holds the object it wants
// already: want, which the patch's answer overwrites.
func PatchTo(ctx context.Context, c client.Client, w Written, obj, want *unstructured.Unstructured) error {
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
	if w != nil && w.Already(obj, PartPatch, string(data)) {
		return nil
	}
	ctrl.LoggerFrom(ctx).V(4).Info("Patching", "kind", obj.GetKind(), "name", obj.GetName(), "patch", string(data))
	if err := c.Patch(ctx, want, patch, client.FieldOwner(composed.FieldManager)); err != nil {
		return errors.Wrap(err, errPatch)
	}
	if w != nil {
		w.Record(obj, want.GetResourceVersion(), PartPatch, string(data))
	}
	obj.Object = want.Object
	return nil
}

// LabelCRD applies the labels a CRD lacks, server-side under owner's
// field manager, which the apply of whoever installed the CRD leaves alone.
// It reads the CRD with c (the cache, metadata only) and writes nothing
// when the CRD has them, or (with w) when it applied them over the version
// cached; it says whether it wrote. A missing CRD is an error
// apierrors.IsNotFound recognises.
func LabelCRD(ctx context.Context, c client.Client, w Written, name string, want map[string]string, owner string) (bool, error) {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(extv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return false, errors.Wrap(err, errGetCRD)
	}
	value := labels.Set(want).String()
	if labels.SelectorFromSet(want).Matches(labels.Set(crd.GetLabels())) || (w != nil && w.Already(crd, PartLabels, value)) {
		return false, nil
	}
	patch := &unstructured.Unstructured{}
	patch.SetGroupVersionKind(crd.GroupVersionKind())
	patch.SetName(name)
	patch.SetLabels(maps.Clone(want))
	// Only the labels are applied: an unstructured apply configuration
	// sends what it holds, where a typed CRD one would send its whole spec.
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(patch), client.FieldOwner(owner)); err != nil {
		return false, errors.Wrapf(err, "cannot label CustomResourceDefinition %s", name)
	}
	if w != nil {
		w.Record(crd, patch.GetResourceVersion(), PartLabels, value)
	}
	return true, nil
}
