package composed

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kmeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

var (
	xrGVK     = schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "XNetwork"}
	cmGVK     = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secretGVK = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	nsGVK     = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	subnetGVK = schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "XSubnet"}
)

// xrOf is an XR of team-a with uid, controlled by owner when it is set, whose
// resource references are refs (apiVersion, kind, name, and optionally
// namespace).
func xrOf(name string, uid types.UID, owner types.UID, refs ...[]string) *composite.Unstructured {
	xr := composite.New(composite.WithGroupVersionKind(xrGVK))
	xr.SetNamespace("team-a")
	xr.SetName(name)
	xr.SetUID(uid)
	if owner != "" {
		xr.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: xrGVK.GroupVersion().String(), Kind: xrGVK.Kind, Name: "parent", UID: owner, Controller: ptr.To(true)}})
	}
	var rs []corev1.ObjectReference
	for _, r := range refs {
		ref := corev1.ObjectReference{APIVersion: r[0], Kind: r[1], Name: r[2]}
		if len(r) > 3 {
			ref.Namespace = r[3]
		}
		rs = append(rs, ref)
	}
	xr.SetResourceReferences(rs)
	return xr
}

// composedBy is a ConfigMap of team-a that owner controls (none when owner is
// empty), with annotations, labels and finalizers as given.
func composedBy(name string, owner types.UID, mutate ...func(*corev1.ConfigMap)) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name)}}
	if owner != "" {
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: xrGVK.GroupVersion().String(), Kind: xrGVK.Kind, Name: "xr", UID: owner, Controller: ptr.To(true)}}
	}
	for _, m := range mutate {
		m(cm)
	}
	return cm
}

func cmRef(name string) []string { return []string{"v1", "ConfigMap", name} }

// sentTo is what the fake API was asked to write: verb and name, and the
// merge patch's body.
type sentTo struct{ verb, name, body string }

// newAPI returns Resources over a fake API holding objs, where the bridge
// may read every kind but those in denied, and the writes it records.
func newAPI(t *testing.T, denied []string, l Labeller, objs ...client.Object) (Resources, *[]sentTo) {
	t.Helper()
	return newAPIWith(t, denied, l, nil, objs...)
}

// newAPIWith is newAPI with options.
func newAPIWith(t *testing.T, denied []string, l Labeller, opts []Option, objs ...client.Object) (Resources, *[]sentTo) {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := xpextv2.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	mapper := kmeta.NewDefaultRESTMapper(nil)
	mapper.Add(xrGVK, kmeta.RESTScopeNamespace)
	mapper.Add(cmGVK, kmeta.RESTScopeNamespace)
	mapper.Add(secretGVK, kmeta.RESTScopeNamespace)
	mapper.Add(nsGVK, kmeta.RESTScopeRoot)
	mapper.Add(subnetGVK, kmeta.RESTScopeNamespace)
	var writes []sentTo
	c := fake.NewClientBuilder().WithScheme(s).WithRESTMapper(mapper).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			raw, err := p.Data(obj)
			if err != nil {
				return err
			}
			writes = append(writes, sentTo{"patch", obj.GetName(), string(raw)})
			return c.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			writes = append(writes, sentTo{verb: "delete", name: obj.GetName()})
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	missing := func(_ context.Context, gr schema.GroupResource) ([]string, error) {
		if slices.Contains(denied, gr.Resource) {
			return []string{"list " + gr.Resource}, nil
		}
		return nil, nil
	}
	return New(c, xrGVK, nopWatcher{}, missing, l, opts...), &writes
}

func names(objs []*metav1.PartialObjectMetadata) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return out
}

func TestObserve(t *testing.T) {
	nested := xrOf("nested", "nested-uid", "xr-uid", cmRef("inner"), []string{xrGVK.GroupVersion().String(), xrGVK.Kind, "nested"})
	xrd := &xpextv2.CompositeResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "xnetworks.example.org"}}
	cases := map[string]struct {
		reason  string
		xr      *composite.Unstructured
		denied  []string
		objs    []client.Object
		own     []string
		all     []string
		foreign []string
		err     string
	}{
		"NoReferencesNoReads": {
			reason: "an XR that composed nothing costs no read",
			xr:     xrOf("xr", "xr-uid", ""),
		},
		"ControlledAndNot": {
			reason:  "only what the XR controls is its; a resource another controls, one gone, and references the bridge does not follow are named or skipped",
			xr:      xrOf("xr", "xr-uid", "", cmRef("mine"), cmRef("theirs"), cmRef("gone"), []string{"v1", "ConfigMap", "elsewhere", "team-b"}, []string{"v1", "Namespace", "kube-system"}, []string{"other.org/v1", "Unknown", "x"}, []string{"v1", "Secret", "s"}),
			denied:  []string{"secrets"},
			objs:    []client.Object{composedBy("mine", "xr-uid"), composedBy("theirs", "other-uid"), composedBy("elsewhere", "xr-uid", func(c *corev1.ConfigMap) { c.Namespace = "team-b" })},
			own:     []string{"mine"},
			all:     []string{"mine"},
			foreign: []string{"ConfigMap/elsewhere", "ConfigMap/theirs", "Namespace/kube-system", "Secret/s", "Unknown/x"},
		},
		"NestedXRsFollowedOnce": {
			reason: "a composed XR's resources are the tree's too, and an XR naming itself is walked once",
			xr:     xrOf("xr", "xr-uid", "", cmRef("mine"), []string{xrGVK.GroupVersion().String(), xrGVK.Kind, "nested"}, []string{xrGVK.GroupVersion().String(), xrGVK.Kind, "xr"}),
			objs: []client.Object{xrd, composedBy("mine", "xr-uid"), composedBy("inner", "nested-uid"), &nested.Unstructured,
				func() client.Object { x := xrOf("xr", "xr-uid", ""); return &x.Unstructured }()},
			own:     []string{"mine", "nested"},
			all:     []string{"mine", "nested", "inner"},
			foreign: []string{"XNetwork/xr"},
		},
		"TooMany": {
			reason: "past MaxComposed resources the walk stops with an error the XR reports",
			xr: func() *composite.Unstructured {
				refs := make([][]string, 0, MaxComposed+1)
				for i := range MaxComposed + 1 {
					refs = append(refs, cmRef("cm-"+strconv.Itoa(i)))
				}
				return xrOf("xr", "xr-uid", "", refs...)
			}(),
			objs: func() []client.Object {
				var out []client.Object
				for i := range MaxComposed + 1 {
					out = append(out, composedBy("cm-"+strconv.Itoa(i), "xr-uid"))
				}
				return out
			}(),
			err: "more than 4096 composed resources",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, _ := newAPI(t, tc.denied, nil, tc.objs...)
			tree, err := r.Observe(t.Context(), tc.xr)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%s\nObserve(...): want an error with %q, got %v", tc.reason, tc.err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nObserve(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.own, names(tree.Own), cmpEmpty); diff != "" {
				t.Errorf("%s\nOwn: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.all, names(tree.All), cmpEmpty); diff != "" {
				t.Errorf("%s\nAll: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.foreign, tree.Foreign, cmpEmpty); diff != "" {
				t.Errorf("%s\nForeign: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

var cmpEmpty = cmp.Comparer(slices.Equal[[]string])

func TestXRsOf(t *testing.T) {
	controlledBy := func(gvk schema.GroupVersionKind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
	xrOfKind := func(gvk schema.GroupVersionKind, name string, uid types.UID, owner []metav1.OwnerReference, refs ...corev1.ObjectReference) *composite.Unstructured {
		x := composite.New(composite.WithGroupVersionKind(gvk))
		x.SetNamespace("team-a")
		x.SetName(name)
		x.SetUID(uid)
		x.SetOwnerReferences(owner)
		x.SetResourceReferences(refs)
		return x
	}
	refTo := func(gvk schema.GroupVersionKind, name string) corev1.ObjectReference {
		return corev1.ObjectReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: name}
	}
	cm := func(name string, owner []metav1.OwnerReference) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, OwnerReferences: owner}}
	}
	// top composes a subnet (another XR kind) and an XNetwork of its own
	// kind; each of those composes a ConfigMap; loop-a and loop-b control
	// each other.
	top := xrOfKind(xrGVK, "top", "top-uid", nil, refTo(subnetGVK, "subnet"), refTo(xrGVK, "inner"))
	subnet := xrOfKind(subnetGVK, "subnet", "subnet-uid", controlledBy(xrGVK, "top", "top-uid"), refTo(cmGVK, "subnet-cm"))
	inner := xrOfKind(xrGVK, "inner", "inner-uid", controlledBy(xrGVK, "top", "top-uid"))
	loopA := xrOfKind(xrGVK, "loop-a", "loop-a-uid", controlledBy(subnetGVK, "loop-b", "loop-b-uid"))
	loopB := xrOfKind(subnetGVK, "loop-b", "loop-b-uid", controlledBy(xrGVK, "loop-a", "loop-a-uid"))
	objs := []client.Object{
		&xpextv2.CompositeResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "xsubnets.example.org"}},
		&xpextv2.CompositeResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "xnetworks.example.org"}},
		&top.Unstructured, &subnet.Unstructured, &inner.Unstructured, &loopA.Unstructured, &loopB.Unstructured,
		cm("subnet-cm", controlledBy(subnetGVK, "subnet", "subnet-uid")),
	}
	cases := map[string]struct {
		reason string
		obj    client.Object
		want   []string
	}{
		"Direct": {
			reason: "a resource the XR controls wakes it",
			obj:    cm("mine", controlledBy(xrGVK, "top", "top-uid")),
			want:   []string{"top"},
		},
		"NestedOtherKind": {
			reason: "a resource a nested XR of another kind controls wakes the XR at the top of the tree",
			obj:    cm("subnet-cm", controlledBy(subnetGVK, "subnet", "subnet-uid")),
			want:   []string{"top"},
		},
		"NestedSameKind": {
			reason: "a nested XR of the reconciler's kind is woken, and so is the XR above it",
			obj:    cm("inner-cm", controlledBy(xrGVK, "inner", "inner-uid")),
			want:   []string{"inner", "top"},
		},
		"NotController": {
			reason: "an owner that is not the controller wakes nothing",
			obj: cm("owned", []metav1.OwnerReference{{
				APIVersion: xrGVK.GroupVersion().String(), Kind: xrGVK.Kind, Name: "top", UID: "top-uid",
			}}),
		},
		"UnknownKind": {
			reason: "a controller of a kind no observed tree holds is not read",
			obj:    cm("other", controlledBy(schema.GroupVersionKind{Group: "other.org", Version: "v1", Kind: "XOther"}, "o", "o-uid")),
		},
		"StaleUID": {
			reason: "a nested XR that is not the one the reference names ends the walk",
			obj:    cm("stale", controlledBy(subnetGVK, "subnet", "old-uid")),
		},
		"Gone": {
			reason: "a nested XR that is gone ends the walk",
			obj:    cm("orphan", controlledBy(subnetGVK, "gone", "gone-uid")),
		},
		"Loop": {
			reason: "XRs that control each other are walked MaxNesting levels at most",
			obj:    cm("loop-cm", controlledBy(subnetGVK, "loop-b", "loop-b-uid")),
			want:   slices.Repeat([]string{"loop-a"}, (MaxNesting+1)/2),
		},
	}
	r, _ := newAPI(t, nil, nil, objs...)
	if _, err := r.Observe(t.Context(), top); err != nil {
		t.Fatalf("Observe(top): %v", err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, req := range r.(*api).xrsOf(t.Context(), tc.obj) {
				if req.Namespace != "team-a" {
					t.Errorf("xrsOf: request in namespace %q, want team-a", req.Namespace)
				}
				got = append(got, req.Name)
			}
			if diff := cmp.Diff(tc.want, got, cmpEmpty); diff != "" {
				t.Errorf("%s\nxrsOf: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestActs(t *testing.T) {
	held := func(c *corev1.ConfigMap) {
		c.Annotations = map[string]string{infrav1.CrossplanePausedAnnotation: "true", infrav1.CredentialsHoldAnnotation: "true"}
	}
	revoked := func(c *corev1.ConfigMap) {
		c.Labels = map[string]string{infrav1.CredentialsRevokedLabel: "pending"}
	}
	pausedByOthers := func(c *corev1.ConfigMap) {
		c.Annotations = map[string]string{infrav1.CrossplanePausedAnnotation: "true"}
	}
	guarded := func(c *corev1.ConfigMap) {
		c.Finalizers = []string{infrav1.MoveGuardFinalizer}
		c.Annotations = map[string]string{infrav1.CrossplanePausedAnnotation: "true", infrav1.PausedForMoveAnnotation: ""}
	}
	cases := map[string]struct {
		reason    string
		objs      []client.Object
		act       func(context.Context, Resources, *Tree) ([]string, error)
		writes    []sentTo
		remaining []string
		// adapted: the composed kind is one whose XRs the bridge holds.
		adapted bool
	}{
		"HoldPausesAndMarks": {
			reason: "a hold pauses what is not paused, marked as the credentials' hold; a pause of anyone else's is left",
			objs:   []client.Object{composedBy("a", "xr-uid"), composedBy("b", "xr-uid", pausedByOthers)},
			act:    hold(true),
			writes: []sentTo{{"patch", "a", `{"metadata":{"annotations":{"capxp.dev/held-for-credentials":"true","crossplane.io/paused":"true"},"resourceVersion":"999"}}`}},
		},
		"ReleaseLiftsOnlyItsHold": {
			reason: "a release lifts the credentials' hold, and leaves a revocation's pause (marking it the revocation's alone) and anyone else's",
			objs:   []client.Object{composedBy("a", "xr-uid", held), composedBy("b", "xr-uid", held, revoked), composedBy("c", "xr-uid", pausedByOthers)},
			act:    hold(false),
			writes: []sentTo{
				{"patch", "a", `{"metadata":{"annotations":null,"resourceVersion":"999"}}`},
				{"patch", "b", `{"metadata":{"annotations":{"capxp.dev/held-for-credentials":null},"labels":{"capxp.dev/credentials-revoked":"paused"},"resourceVersion":"999"}}`},
			},
		},
		"ReleaseLeavesAnXRsOwnHold": {
			reason:  "an XR of an adapted kind in the tree (a tenant gave it a controller reference) keeps its own hold: its own reconcile releases it",
			objs:    []client.Object{composedBy("a", "xr-uid", held)},
			adapted: true,
			act:     hold(false),
		},
		"UnguardLeavesAHold": {
			reason: "removing the guard of a resource also held for credentials leaves the pause to the hold",
			objs: []client.Object{composedBy("a", "xr-uid", guarded, func(c *corev1.ConfigMap) {
				c.Annotations[infrav1.CredentialsHoldAnnotation] = "true"
			})},
			act:    guard(false),
			writes: []sentTo{{"patch", "a", `{"metadata":{"annotations":{"capxp.dev/paused-for-move":null},"finalizers":null,"resourceVersion":"999"}}`}},
		},
		"GuardFinalizesAndPauses": {
			reason: "the move guard is a finalizer and a pause marked as the guard's; one guarded already is left",
			objs:   []client.Object{composedBy("a", "xr-uid"), composedBy("b", "xr-uid", guarded)},
			act:    guard(true),
			writes: []sentTo{{"patch", "a", `{"metadata":{"annotations":{"capxp.dev/paused-for-move":"","crossplane.io/paused":"true"},"finalizers":["capxp.dev/move-guard"],"resourceVersion":"999"}}`}},
		},
		"UnguardLiftsOnlyTheGuardsPause": {
			reason: "removing the guard lifts the pause it set, and only that one",
			objs: []client.Object{composedBy("a", "xr-uid", guarded), composedBy("b", "xr-uid", pausedByOthers, func(c *corev1.ConfigMap) {
				c.Finalizers = []string{infrav1.MoveGuardFinalizer}
			})},
			act: guard(false),
			writes: []sentTo{
				{"patch", "a", `{"metadata":{"annotations":null,"finalizers":null,"resourceVersion":"999"}}`},
				{"patch", "b", `{"metadata":{"finalizers":null,"resourceVersion":"999"}}`},
			},
		},
		"DeleteUnguardsThenDeletes": {
			reason: "a deletion is not a move: the guard goes, then the resource, which remains until it is gone; one deleting already is not deleted again",
			objs: []client.Object{composedBy("a", "xr-uid", guarded), composedBy("b", "xr-uid", func(c *corev1.ConfigMap) {
				c.Finalizers = []string{"provider"}
				c.DeletionTimestamp = ptr.To(metav1.Now())
			})},
			act: func(ctx context.Context, r Resources, t *Tree) ([]string, error) {
				return t.OwnNames(), r.Delete(ctx, t)
			},
			writes: []sentTo{
				{"patch", "a", `{"metadata":{"annotations":null,"finalizers":null,"resourceVersion":"999"}}`},
				{verb: "delete", name: "a"},
			},
			remaining: []string{"ConfigMap/a", "ConfigMap/b"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var refs [][]string
			for _, o := range tc.objs {
				refs = append(refs, cmRef(o.GetName()))
			}
			var opts []Option
			if tc.adapted {
				opts = append(opts, WithAdapted(func(gk schema.GroupKind) bool { return gk == cmGVK.GroupKind() }))
			}
			r, writes := newAPIWith(t, nil, nil, opts, tc.objs...)
			tree, err := r.Observe(t.Context(), xrOf("xr", "xr-uid", "", refs...))
			if err != nil {
				t.Fatal(err)
			}
			remaining, err := tc.act(t.Context(), r, tree)
			if err != nil {
				t.Fatalf("%s\n%v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.writes, *writes, cmp.AllowUnexported(sentTo{}), cmp.Transformer("rv", normalizeRV)); diff != "" {
				t.Errorf("%s\nwrites: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.remaining, remaining, cmpEmpty); diff != "" {
				t.Errorf("%s\nremaining: -want +got:\n%s", tc.reason, diff)
			}
			// What a later step of the same reconcile reads is what was
			// written: the tree's objects are the patched ones.
			for _, w := range *writes {
				if w.verb != "patch" {
					continue
				}
				for _, o := range tree.All {
					if o.GetName() == w.name && o.GetResourceVersion() == "999" {
						t.Errorf("%s\n%s: the tree kept the resourceVersion read, not the patched object's", tc.reason, w.name)
					}
				}
			}
		})
	}
}

// normalizeRV makes a patch's optimistic-lock resourceVersion comparable:
// the fake API numbers objects from 999.
func normalizeRV(s sentTo) sentTo {
	if i := strings.Index(s.body, `"resourceVersion":"`); i >= 0 {
		j := strings.Index(s.body[i+19:], `"`)
		s.body = s.body[:i+19] + "999" + s.body[i+19+j:]
	}
	return s
}

func hold(on bool) func(context.Context, Resources, *Tree) ([]string, error) {
	return func(ctx context.Context, r Resources, t *Tree) ([]string, error) { return nil, r.Hold(ctx, t, on) }
}

func guard(on bool) func(context.Context, Resources, *Tree) ([]string, error) {
	return func(ctx context.Context, r Resources, t *Tree) ([]string, error) { return nil, r.Guard(ctx, t, on) }
}

// labeller records which kinds it was asked to label, failing those in fail.
type labeller struct {
	done  map[schema.GroupVersionKind]bool
	fail  map[schema.GroupVersionKind]bool
	asked []string
}

func (l *labeller) Done(gvk schema.GroupVersionKind) bool { return l.done[gvk] }

func (l *labeller) Label(_ context.Context, gvk schema.GroupVersionKind) error {
	l.asked = append(l.asked, gvk.Kind)
	if l.fail[gvk] {
		return errors.Errorf("cannot label %s", gvk.Kind)
	}
	return nil
}

func TestLabelCRDs(t *testing.T) {
	nested := xrOf("nested", "nested-uid", "xr-uid", cmRef("inner"))
	xrd := &xpextv2.CompositeResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "xnetworks.example.org"}}
	objs := []client.Object{xrd, &nested.Unstructured, composedBy("inner", "nested-uid"), composedBy("a", "xr-uid"), composedBy("b", "xr-uid")}
	xr := xrOf("xr", "xr-uid", "", cmRef("a"), cmRef("b"), []string{xrGVK.GroupVersion().String(), xrGVK.Kind, "nested"})
	cases := map[string]struct {
		reason string
		l      *labeller
		asked  []string
		errs   int
	}{
		"EachGroupedKindOnce": {
			reason: "each kind of the tree is labelled once; a core kind (no group) has no CRD",
			l:      &labeller{},
			asked:  []string{"XNetwork"},
		},
		"DoneKindsSkipped": {
			reason: "a kind known labelled costs nothing",
			l:      &labeller{done: map[schema.GroupVersionKind]bool{xrGVK: true}},
		},
		"FailuresReturned": {
			reason: "a CRD that cannot be labelled is returned, for the XR to report",
			l:      &labeller{fail: map[schema.GroupVersionKind]bool{xrGVK: true}},
			asked:  []string{"XNetwork"},
			errs:   1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, _ := newAPI(t, nil, tc.l, objs...)
			tree, err := r.Observe(t.Context(), xr)
			if err != nil {
				t.Fatal(err)
			}
			errs := r.LabelCRDs(t.Context(), tree)
			if diff := cmp.Diff(tc.asked, tc.l.asked, cmpEmpty); diff != "" {
				t.Errorf("%s\nlabelled: -want +got:\n%s", tc.reason, diff)
			}
			if len(errs) != tc.errs {
				t.Errorf("%s\nerrors: want %d, got %v", tc.reason, tc.errs, errs)
			}
		})
	}
}

// nopWatcher starts no watch: a unit test has no cache.
type nopWatcher struct{}

func (nopWatcher) Watch(logr.Logger, client.Object, handler.EventHandler, ...predicate.Predicate) error {
	return nil
}

func TestActedOn(t *testing.T) {
	now := metav1.Now()
	base := func(edit func(*metav1.PartialObjectMetadata)) *metav1.PartialObjectMetadata {
		o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: "db", ResourceVersion: "1", Generation: 1,
			Annotations:     map[string]string{"crossplane.io/composition-resource-name": "db"},
			Labels:          map[string]string{"crossplane.io/composite": "xr"},
			OwnerReferences: []metav1.OwnerReference{{UID: "xr", Controller: ptr.To(true)}},
		}}
		if edit != nil {
			edit(o)
		}
		return o
	}
	cases := map[string]struct {
		edit func(*metav1.PartialObjectMetadata)
		want bool
	}{
		"StatusOnly": {edit: func(o *metav1.PartialObjectMetadata) {
			o.ResourceVersion = "2"
			o.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "provider", Subresource: "status"}}
		}},
		"SpecOnly": {edit: func(o *metav1.PartialObjectMetadata) { o.Generation = 2 }},
		"ProviderAnnotations": {edit: func(o *metav1.PartialObjectMetadata) {
			o.Annotations["crossplane.io/external-name"] = "db"
			o.Annotations["crossplane.io/external-create-succeeded"] = "2026-11-28T00:00:00Z"
		}},
		"ProviderFinalizer": {edit: func(o *metav1.PartialObjectMetadata) {
			o.Finalizers = []string{"finalizer.managedresource.crossplane.io"}
		}},
		"OtherLabel":    {edit: func(o *metav1.PartialObjectMetadata) { o.Labels["team"] = "a" }},
		"Paused":        {edit: func(o *metav1.PartialObjectMetadata) { o.Annotations["crossplane.io/paused"] = "true" }, want: true},
		"Held":          {edit: func(o *metav1.PartialObjectMetadata) { o.Annotations[infrav1.CredentialsHoldAnnotation] = "true" }, want: true},
		"PausedForMove": {edit: func(o *metav1.PartialObjectMetadata) { o.Annotations[infrav1.PausedForMoveAnnotation] = "" }, want: true},
		"Revoked": {edit: func(o *metav1.PartialObjectMetadata) {
			o.Labels[infrav1.CredentialsRevokedLabel] = infrav1.CredentialsRevokedPaused
		}, want: true},
		"Guarded": {edit: func(o *metav1.PartialObjectMetadata) {
			o.Finalizers = []string{"finalizer.managedresource.crossplane.io", infrav1.MoveGuardFinalizer}
		}, want: true},
		"Disowned":  {edit: func(o *metav1.PartialObjectMetadata) { o.OwnerReferences = nil }, want: true},
		"Deleting":  {edit: func(o *metav1.PartialObjectMetadata) { o.DeletionTimestamp = &now }, want: true},
		"Unchanged": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := actedOn.Update(event.UpdateEvent{ObjectOld: base(nil), ObjectNew: base(tc.edit)})
			if got != tc.want {
				t.Errorf("actedOn.Update: got %t, want %t", got, tc.want)
			}
		})
	}
	if !actedOn.Create(event.CreateEvent{Object: base(nil)}) || !actedOn.Delete(event.DeleteEvent{Object: base(nil)}) {
		t.Error("actedOn must pass creations and deletions: the tree's membership is read from them")
	}
}
