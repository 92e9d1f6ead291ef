package readiness

import (
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

func xr(gen int64, cs ...xpv2.Condition) *composite.Unstructured {
	x := composite.New()
	x.SetGeneration(gen)
	x.SetConditions(cs...)
	return x
}

func cond(t xpv2.ConditionType, s corev1.ConditionStatus, reason, msg string, gen int64) xpv2.Condition {
	return xpv2.Condition{Type: t, Status: s, Reason: xpv2.ConditionReason(reason), Message: msg, ObservedGeneration: gen}
}

func TestObserve(t *testing.T) {
	cases := map[string]struct {
		reason string
		xr     *composite.Unstructured
		mirror Mirror
		want   verdict.Verdict
	}{
		"ReadyAndSynced": {
			reason: "Ready and Synced for the current generation is ready",
			xr:     xr(2, cond(xpv2.TypeReady, corev1.ConditionTrue, "Available", "", 2), cond(xpv2.TypeSynced, corev1.ConditionTrue, "ReconcileSuccess", "", 2)),
			want:   verdict.Verdict{Ready: true},
		},
		"NoConditions": {
			reason: "a new XR is waiting for Crossplane",
			xr:     xr(1),
			want:   verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: "Crossplane has not reported the composite resource Ready yet"},
		},
		"NoStatus": {
			reason: "an XR without any status yet is not reported as an empty Ready condition",
			xr: func() *composite.Unstructured {
				u := composite.New()
				u.SetGeneration(1)
				return u
			}(),
			want: verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: "Crossplane has not reported the composite resource Ready yet"},
		},
		"Unready": {
			reason: "Crossplane's words about unready resources are kept",
			xr:     xr(1, cond(xpv2.TypeReady, corev1.ConditionFalse, "Creating", "Unready resources: vpc, subnet-a", 1), cond(xpv2.TypeSynced, corev1.ConditionTrue, "ReconcileSuccess", "", 1)),
			want:   verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: "Ready is False (Creating): Unready resources: vpc, subnet-a"},
		},
		"CompositionFailed": {
			reason: "a failing composition's message (in Synced) wins over Ready",
			xr: xr(1, cond(xpv2.TypeReady, corev1.ConditionTrue, "Available", "", 1),
				cond(xpv2.TypeSynced, corev1.ConditionFalse, "ReconcileError", `cannot compose resources: pipeline step "patch-and-transform" returned a fatal result: bad patch`, 1)),
			want: verdict.Verdict{Reason: infrav1.CompositionFailedReason, Message: `Synced is False (ReconcileError): cannot compose resources: pipeline step "patch-and-transform" returned a fatal result: bad patch`},
		},
		"ReadyForOldGeneration": {
			reason: "Ready observed for an older spec says nothing about the current one",
			xr:     xr(3, cond(xpv2.TypeReady, corev1.ConditionTrue, "Available", "", 2), cond(xpv2.TypeSynced, corev1.ConditionTrue, "ReconcileSuccess", "", 3)),
			want:   verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: "Crossplane reported Ready for generation 2; waiting for generation 3"},
		},
		"SyncedForOldGeneration": {
			reason: "Synced observed for an older spec is stale too",
			xr:     xr(3, cond(xpv2.TypeReady, corev1.ConditionTrue, "Available", "", 3), cond(xpv2.TypeSynced, corev1.ConditionTrue, "ReconcileSuccess", "", 1)),
			want:   verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: "Crossplane reported Synced for generation 1; waiting for generation 3"},
		},
		"ReadyButNotSyncedYet": {
			reason: "both conditions are needed",
			xr:     xr(1, cond(xpv2.TypeReady, corev1.ConditionTrue, "Available", "", 1)),
			want:   verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: "Crossplane has not reported the composite resource Synced yet"},
		},
		"OwnMirrorOfOutputs": {
			reason: "the bridge's own copy of the outputs into spec is not waited for",
			xr:     xr(4, cond(xpv2.TypeReady, corev1.ConditionTrue, "Available", "", 3), cond(xpv2.TypeSynced, corev1.ConditionTrue, "ReconcileSuccess", "", 3)),
			mirror: Mirror{From: 3, To: 4},
			want:   verdict.Verdict{Ready: true},
		},
		"ChangedAfterOwnMirror": {
			reason: "a change after the bridge's copy is waited for",
			xr:     xr(5, cond(xpv2.TypeReady, corev1.ConditionTrue, "Available", "", 3), cond(xpv2.TypeSynced, corev1.ConditionTrue, "ReconcileSuccess", "", 3)),
			mirror: Mirror{From: 3, To: 4},
			want:   verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: "Crossplane reported Ready for generation 3; waiting for generation 5"},
		},
		"OlderThanOwnMirror": {
			reason: "conditions older than the generation the copy was made over are stale",
			xr:     xr(4, cond(xpv2.TypeReady, corev1.ConditionTrue, "Available", "", 2), cond(xpv2.TypeSynced, corev1.ConditionTrue, "ReconcileSuccess", "", 2)),
			mirror: Mirror{From: 3, To: 4},
			want:   verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: "Crossplane reported Ready for generation 2; waiting for generation 4"},
		},
		"PausedByCrossplane": {
			reason: "a paused XR reports why, and waits: paused is not failed",
			xr:     xr(1, cond(xpv2.TypeSynced, corev1.ConditionFalse, "ReconcilePaused", "Reconciliation is paused via the pause annotation", 1)),
			want:   verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: "Synced is False (ReconcilePaused): Reconciliation is paused via the pause annotation"},
		},
		"PausedAtTheCurrentGeneration": {
			reason: "a pause Crossplane acknowledged for the current spec is still reported once the XR is unpaused",
			xr:     xr(2, cond(xpv2.TypeReady, corev1.ConditionTrue, "Available", "", 2), cond(xpv2.TypeSynced, corev1.ConditionFalse, "ReconcilePaused", "Reconciliation is paused via the pause annotation", 2)),
			want:   verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: "Synced is False (ReconcilePaused): Reconciliation is paused via the pause annotation"},
		},
		"StalePauseOfAnUnpausedXR": {
			reason: "a pause of an older generation on an unpaused XR is not reported: Ready says what Crossplane composes now",
			xr:     xr(5, cond(xpv2.TypeReady, corev1.ConditionFalse, "Creating", "Unready resources: node", 5), cond(xpv2.TypeSynced, corev1.ConditionFalse, "ReconcilePaused", "Reconciliation is paused via the pause annotation", 1)),
			want:   verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: "Ready is False (Creating): Unready resources: node"},
		},
		"StalePauseJustUnpaused": {
			reason: "right after the unpause, before Crossplane composes, the XR waits for Ready",
			xr:     xr(5, cond(xpv2.TypeSynced, corev1.ConditionFalse, "ReconcilePaused", "Reconciliation is paused via the pause annotation", 1)),
			want:   verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: "Crossplane has not reported the composite resource Ready yet"},
		},
		"StalePauseWhileReady": {
			reason: "Ready with a stale pause in Synced waits for Synced",
			xr:     xr(5, cond(xpv2.TypeReady, corev1.ConditionTrue, "Available", "", 5), cond(xpv2.TypeSynced, corev1.ConditionFalse, "ReconcilePaused", "Reconciliation is paused via the pause annotation", 1)),
			want:   verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: "Crossplane has not reported the composite resource Synced yet"},
		},
		"StalePauseOfAPausedXR": {
			reason: "on an XR still paused, the pause is reported whatever its generation",
			xr: func() *composite.Unstructured {
				x := xr(5, cond(xpv2.TypeSynced, corev1.ConditionFalse, "ReconcilePaused", "Reconciliation is paused via the pause annotation", 1))
				x.SetAnnotations(map[string]string{"crossplane.io/paused": "true"})
				return x
			}(),
			want: verdict.Verdict{Reason: infrav1.WaitingForCompositionReason, Message: "Synced is False (ReconcilePaused): Reconciliation is paused via the pause annotation"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Observe(tc.xr, tc.mirror)); diff != "" {
				t.Errorf("%s\nObserve(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCondition(t *testing.T) {
	obj := func(gen any) map[string]any {
		return map[string]any{"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess"},
			map[string]any{"type": "Ready", "status": "False", "reason": "Creating", "message": "Unready resources: vpc", "observedGeneration": gen},
		}}}
	}
	cases := map[string]struct {
		obj  map[string]any
		t    xpv2.ConditionType
		want xpv2.Condition
	}{
		"FromTheCache": {obj: obj(int64(3)), t: xpv2.TypeReady,
			want: xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: "Creating", Message: "Unready resources: vpc", ObservedGeneration: 3}},
		"FromJSON": {obj: obj(float64(3)), t: xpv2.TypeReady,
			want: xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: "Creating", Message: "Unready resources: vpc", ObservedGeneration: 3}},
		"Missing":  {obj: obj(int64(3)), t: "Responsive", want: xpv2.Condition{Type: "Responsive", Status: corev1.ConditionUnknown}},
		"NoStatus": {obj: map[string]any{}, t: xpv2.TypeReady, want: xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionUnknown}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Condition(tc.obj, tc.t)); diff != "" {
				t.Errorf("Condition() -want +got:\n%s", diff)
			}
		})
	}
}

func TestReplaced(t *testing.T) {
	at := func(s string) metav1.Time {
		ts, _ := time.Parse(time.RFC3339, s)
		return metav1.NewTime(ts)
	}
	c := func(gen int64, ts string) xpv2.Condition {
		return xpv2.Condition{Type: xpv2.TypeReady, ObservedGeneration: gen, LastTransitionTime: at(ts)}
	}
	cases := map[string]struct {
		c, newest xpv2.Condition
		want      bool
	}{
		"AnOlderGeneration":                    {c: c(4, "2026-11-23T23:39:45Z"), newest: c(5, "2026-11-23T23:39:42Z"), want: true},
		"ANewerGeneration":                     {c: c(6, "2026-11-23T23:39:41Z"), newest: c(5, "2026-11-23T23:39:42Z"), want: false},
		"TheSameGenerationAnEarlierTransition": {c: c(5, "2026-11-23T23:39:41Z"), newest: c(5, "2026-11-23T23:39:42Z"), want: true},
		"TheSameGenerationALaterTransition":    {c: c(5, "2026-11-23T23:39:43Z"), newest: c(5, "2026-11-23T23:39:42Z"), want: false},
		"TheSameSecond":                        {c: c(5, "2026-11-23T23:39:42Z"), newest: c(5, "2026-11-23T23:39:42Z"), want: false},
		"NoneYet":                              {c: c(1, "2026-11-23T23:39:41Z"), newest: xpv2.Condition{}, want: false},
		"GoneAfterOne":                         {c: xpv2.Condition{}, newest: c(1, "2026-11-23T23:39:41Z"), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Replaced(tc.c, tc.newest); got != tc.want {
				t.Errorf("Replaced() = %v, want %v", got, tc.want)
			}
		})
	}
}
