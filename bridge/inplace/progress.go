package inplace

import (
	"fmt"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	"github.com/capxp/cluster-api-provider-crossplane/bridge/readiness"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

// Progress says whether an in-place update has reached a machine: the XR
// Ready and Synced at the generation the update made, and each resource it
// composed Synced at its own current generation, so that the providers,
// not only Crossplane, have taken the change. composed are the
// resources the XR references, as read; a referenced resource not found is
// still being created. The verdict is Ready when the update is done, and
// says what it waits for when it is not.
func Progress(xr *composite.Unstructured, composed []*unstructured.Unstructured, missing []string) verdict.Verdict {
	if v := readiness.Observe(xr, readiness.Mirror{}); !v.Ready {
		return verdict.Verdict{Reason: v.Reason, Message: "the composite resource: " + v.Message}
	}
	if len(missing) > 0 {
		return verdict.NotReady(waiting, "Crossplane is creating %s", missing[0])
	}
	for _, c := range composed {
		if why := unsettled(c); why != "" {
			return verdict.NotReady(waiting, "%s %s: %s", c.GetKind(), c.GetName(), why)
		}
	}
	return verdict.Verdict{Ready: true}
}

// unsettled says why a composed resource has not taken its current spec
// yet; "" when it has: its provider reports it Synced at its current
// generation. Its readiness is the XR's to judge, by the Composition's
// readiness checks. A resource with no conditions (a plain kind a
// provider-less Composition composes) is taken as it is.
func unsettled(c *unstructured.Unstructured) string {
	if meta.IsPaused(c) {
		return "paused (" + meta.AnnotationKeyReconciliationPaused + ")"
	}
	if conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions"); len(conds) == 0 {
		return ""
	}
	synced := readiness.Condition(c.Object, xpv2.TypeSynced)
	switch {
	case synced.Status != corev1.ConditionTrue:
		msg := fmt.Sprintf("Synced is %s", synced.Status)
		if synced.Message != "" {
			msg += ": " + synced.Message
		}
		return msg
	case synced.ObservedGeneration != 0 && synced.ObservedGeneration < c.GetGeneration():
		return fmt.Sprintf("Synced for generation %d; waiting for generation %d", synced.ObservedGeneration, c.GetGeneration())
	}
	return ""
}

// waiting is the reason of an update still under way.
const waiting = "InPlaceUpdateInProgress"
