package controllers

import (
	"context"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/controllers/composed"
)

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
