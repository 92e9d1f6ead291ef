package xr

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/composed"
)

// fakeComposed is what an XR composed, as the reconciler's tests want it:
// one tree, and an error or a result for each act. It records the acts it
// was asked for.
type fakeComposed struct {
	tree                                  composed.Tree
	observeErr, holdErr, guardErr, delErr error
	labelErrs                             []error
	acts                                  []string
}

func (f *fakeComposed) Observe(context.Context, *composite.Unstructured) (*composed.Tree, error) {
	f.acts = append(f.acts, "observe")
	if f.observeErr != nil {
		return nil, f.observeErr
	}
	return &f.tree, nil
}

func (f *fakeComposed) Hold(_ context.Context, _ *composed.Tree, on bool) error {
	f.acts = append(f.acts, map[bool]string{true: "hold", false: "release"}[on])
	return f.holdErr
}

func (f *fakeComposed) Guard(_ context.Context, _ *composed.Tree, on bool) error {
	f.acts = append(f.acts, map[bool]string{true: "guard", false: "unguard"}[on])
	return f.guardErr
}

func (f *fakeComposed) LabelCRDs(context.Context, *composed.Tree) []error {
	f.acts = append(f.acts, "label")
	return f.labelErrs
}

func (f *fakeComposed) Delete(context.Context, *composed.Tree) error {
	f.acts = append(f.acts, "delete")
	return f.delErr
}

// oneComposed is a tree of one composed resource the XR controls.
func oneComposed() composed.Tree {
	o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo-part"}}
	o.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Bucket"})
	return composed.Tree{Own: []*metav1.PartialObjectMetadata{o}, All: []*metav1.PartialObjectMetadata{o}}
}

// pausedForMove is a paused XR Crossplane acknowledged, that clusterctl
// move waits for.
func pausedForMove(u *unstructured.Unstructured) {
	annotate(infrav1.CrossplanePausedAnnotation, "true", infrav1.BlockMoveAnnotation, "")(u)
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{
		"type": string(xpv2.TypeSynced), "status": "False", "reason": string(xpv2.ReasonReconcilePaused),
	}}, "status", "conditions")
}

// TestReconcileComposed covers what the reconciler does with what the
// composed resources answer: the acts it asks for on each path, in order,
// and how their errors and conflicts end the reconcile.
func TestReconcileComposed(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "buckets"}, "demo-part", errors.New("changed"))
	boom := errors.New("boom")
	cases := map[string]struct {
		reason  string
		f       *fakeComposed
		creds   resolverFunc
		xr      *unstructured.Unstructured
		objs    []client.Object
		acts    []string
		err     string
		requeue bool
		writes  []want
		events  []string
	}{
		"ObserveFails": {
			reason: "what the XR composed could not be read: nothing is decided, nothing written, the error returned",
			f:      &fakeComposed{observeErr: boom},
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, composing),
			objs:   []client.Object{testCluster(false)},
			acts:   []string{"observe"},
			err:    "boom",
		},
		"GrantedReleasesThenLabels": {
			reason: "a granted, provisioned XR releases any hold once and labels its kinds once, from the one read",
			f:      &fakeComposed{tree: oneComposed()},
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, composing, annotate(infrav1.BlockMoveAnnotation, "")),
			objs:   []client.Object{testCluster(false)},
			acts:   []string{"observe", "release", "label"},
		},
		"ReleaseConflicts": {
			reason:  "a release decided on a stale read conflicts: read again soon, quietly, and the XR is not unpaused meanwhile",
			f:       &fakeComposed{tree: oneComposed(), holdErr: conflict},
			creds:   granted,
			xr:      testXR(finalizers(infrav1.Finalizer), provisioned, composing, annotate(infrav1.CrossplanePausedAnnotation, "true", infrav1.CredentialsHoldAnnotation, "true")),
			objs:    []client.Object{testCluster(false)},
			acts:    []string{"observe", "unguard", "release"},
			requeue: true,
		},
		"HoldFails": {
			reason: "credentials denied: the XR is held at once, and a failure to pause what it composed is returned to be tried again",
			f:      &fakeComposed{tree: oneComposed(), holdErr: boom},
			creds:  notGranted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, composing),
			objs:   []client.Object{testCluster(false)},
			acts:   []string{"observe", "hold"},
			err:    "boom",
			writes: []want{
				{"patch", "CrossplaneCluster", "demo", []string{`"capxp.dev/held-for-credentials":"true"`, `"crossplane.io/paused":"true"`}},
				{"apply status", "Cluster", "demo", []string{`"reason":"NotGranted"`}},
			},
			events: []string{"Warning NotGranted spec.providerConfigRef: a grant is missing"},
		},
		"LabelFails": {
			reason: "a kind that cannot be labelled keeps the XR out of clusterctl move's reach and says why",
			f:      &fakeComposed{tree: oneComposed(), labelErrs: []error{errors.New("cannot label the CRD of a composed kind for clusterctl move Bucket")}},
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, composing),
			objs:   []client.Object{testCluster(false)},
			acts:   []string{"observe", "release", "label"},
			writes: []want{{"patch", "CrossplaneCluster", "demo", []string{`"clusterctl.cluster.x-k8s.io/block-move":""`}}},
			events: []string{"Warning MoveBlocked cannot label the CRD of a composed kind for clusterctl move Bucket"},
		},
		"GuardFailsOnMove": {
			reason: "a paused XR's resources that cannot be guarded keep the block-move annotation: clusterctl waits, then refuses",
			f:      &fakeComposed{tree: oneComposed(), guardErr: boom},
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, composing, pausedForMove),
			objs:   []client.Object{testCluster(true)},
			acts:   []string{"observe", "label", "guard"},
			err:    "boom",
			events: []string{"Warning MoveBlocked boom"},
		},
		"GuardedOnMove": {
			reason: "once every resource is guarded, the block-move annotation goes",
			f:      &fakeComposed{tree: oneComposed()},
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, composing, pausedForMove),
			objs:   []client.Object{testCluster(true)},
			acts:   []string{"observe", "label", "guard"},
			writes: []want{{"patch", "CrossplaneCluster", "demo", []string{`"clusterctl.cluster.x-k8s.io/block-move":null`}}},
		},
		"UnpausedUnguardsFirst": {
			reason: "an XR unpaused after a move loses its guards before it is Crossplane's again; while they cannot go it stays paused",
			f:      &fakeComposed{tree: oneComposed(), guardErr: boom},
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, composing, annotate(infrav1.CrossplanePausedAnnotation, "true")),
			objs:   []client.Object{testCluster(false)},
			acts:   []string{"observe", "unguard"},
			err:    "boom",
		},
		"DeleteWaits": {
			reason: "a deleted XR waits for what it composed, and the Cluster says for what",
			f:      &fakeComposed{tree: oneComposed()},
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, composing, deleting),
			objs:   []client.Object{testCluster(false)},
			acts:   []string{"observe", "release", "delete"},
			writes: []want{{"apply status", "Cluster", "demo", []string{`"reason":"Deleting"`, `Bucket/demo-part`}}},
		},
		"DeleteFails": {
			reason: "a deletion that fails keeps the finalizer and is tried again; the Cluster says what the XR waits for",
			f:      &fakeComposed{tree: oneComposed(), delErr: boom},
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, composing, deleting),
			objs:   []client.Object{testCluster(false)},
			acts:   []string{"observe", "release", "delete"},
			err:    "boom",
			writes: []want{{"apply status", "Cluster", "demo", []string{`"reason":"Deleting"`, `Bucket/demo-part`}}},
		},
		"DeleteConflicts": {
			reason:  "a guard removed on a stale read conflicts: read again soon, quietly",
			f:       &fakeComposed{tree: oneComposed(), delErr: conflict},
			creds:   granted,
			xr:      testXR(finalizers(infrav1.Finalizer), provisioned, composing, deleting),
			objs:    []client.Object{testCluster(false)},
			acts:    []string{"observe", "release", "delete"},
			requeue: true,
			writes:  []want{{"apply status", "Cluster", "demo", []string{`"reason":"Deleting"`}}},
		},
		"DeletedAndForeign": {
			reason: "with nothing of its own left, the XR is let go; what it names but does not control is said, not deleted",
			f:      &fakeComposed{tree: composed.Tree{Foreign: []string{"Bucket/theirs"}}},
			creds:  granted,
			xr:     testXR(finalizers(infrav1.Finalizer), provisioned, composing, deleting),
			objs:   []client.Object{testCluster(false)},
			acts:   []string{"observe", "release", "delete"},
			writes: []want{
				{"patch", "CrossplaneCluster", "demo", []string{`"finalizers":["composite.apiextensions.crossplane.io"]`}},
				{"apply status", "Cluster", "demo", []string{`"reason":"NotControlled"`}},
			},
			events: []string{"Warning NotControlled Not deleting Bucket/theirs: spec.crossplane.resourceRefs names them but this composite resource does not control them"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := reconcileWith(t, tc.creds, tc.f, tc.xr, tc.objs...)
			if tc.err == "" && o.err != nil || tc.err != "" && (o.err == nil || !strings.Contains(o.err.Error(), tc.err)) {
				t.Errorf("%s\nReconcile: want error %q, got %v", tc.reason, tc.err, o.err)
			}
			if got := o.result.RequeueAfter == conflictRequeue; got != tc.requeue {
				t.Errorf("%s\nrequeued after a conflict: %t, want %t (%+v)", tc.reason, got, tc.requeue, o.result)
			}
			if diff := cmp.Diff(tc.acts, tc.f.acts); diff != "" {
				t.Errorf("%s\nacts -want +got:\n%s", tc.reason, diff)
			}
			checkWrites(t, tc.reason, tc.writes, o.writes)
			if diff := cmp.Diff(tc.events, o.events, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nevents -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
