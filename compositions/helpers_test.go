package compositions_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/internal/compcheck"
	"github.com/capxp/cluster-api-provider-crossplane/internal/render"
)

// annotationTemplate is where Crossplane records which resource template of
// the Composition produced a composed resource.
const annotationTemplate = compositions.AnnotationResourceName

// converged is a Composition driven to readiness.
type converged struct {
	first, last *render.Output
	// composed are the last observed composed resources (with the simulated
	// providers' status), by resource template name.
	composed map[string]*unstructured.Unstructured
	// input is the XR the case started from.
	input *unstructured.Unstructured
}

// converge checks a case with `capxp composition check`'s code: rendered
// round after round, the composed resources fed back as their providers
// would observe them, until the XR is ready; every verdict must hold
// (credentials and bootstrap data in every round, the composed resources
// valid for their CRDs). Once ready there must be no warning event, and
// every selector must select within the XR.
func converge(t *testing.T, tc contractCase) converged {
	t.Helper()
	comp := must(compositions.Read(tc.composition))
	in := testdata(t, tc.xr)
	x := xrd(t, in)
	r, err := compcheck.Check(t.Context(), engine, compcheck.Input{
		Contract: x.GetLabels()[infrav1.ContractLabel], Composition: comp, XRD: x, XR: in, CRDs: providerCRDSet(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range r.Verdicts {
		if !v.OK {
			t.Errorf("✗ %s: %s", v.Field, v.Reason)
		}
	}
	if ready := condition(r.Last.XR, "Ready"); ready["status"] != "True" {
		t.Fatalf("the XR is not ready after %d rounds: conditions %v, events %+v", r.Rounds, r.Last.XR.Object["status"], r.Last.Events)
	}
	// Warnings while resources wait for each other are expected; once
	// ready there must be none.
	for _, ev := range r.Last.Events {
		if ev.Type == "Warning" {
			t.Errorf("round %d: warning event %s: %s", r.Rounds, ev.Reason, ev.Message)
		}
	}
	checkSelectors(t, r.Last.Composed)
	return converged{first: r.First, last: r.Last, composed: byTemplate(r.Observed), input: in}
}

var (
	crdSetOnce sync.Once
	crdSet     *compcheck.CRDs
	crdSetErr  error
)

// providerCRDSet is the composed kinds' CRDs, read once.
func providerCRDSet(t *testing.T) *compcheck.CRDs {
	t.Helper()
	crdSetOnce.Do(func() {
		files, err := providerCRDs()
		if err != nil {
			crdSetErr = err
			return
		}
		crdSet, crdSetErr = compcheck.LoadCRDs(files...)
	})
	if crdSetErr != nil {
		t.Fatal(crdSetErr)
	}
	return crdSet
}

// checkSelectors: every selector that picks a sibling composed resource
// matches at least one, so a label typo cannot leave a reference unresolved.
func checkSelectors(t *testing.T, composed []*unstructured.Unstructured) {
	t.Helper()
	var walk func(path string, v any, owner *unstructured.Unstructured)
	walk = func(path string, v any, owner *unstructured.Unstructured) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				sel, isMap := c.(map[string]any)
				if strings.HasSuffix(k, "Selector") && isMap && sel["matchControllerRef"] == true {
					labels := map[string]string{}
					ml, _ := sel["matchLabels"].(map[string]any)
					for lk, lv := range ml {
						labels[lk], _ = lv.(string)
					}
					found := false
					for _, o := range composed {
						found = found || (o != owner && matches(o.GetLabels(), labels))
					}
					if !found {
						t.Errorf("%s %s.%s matches no composed resource: %v", owner.GetKind(), path, k, labels)
					}
					continue
				}
				walk(path+"."+k, c, owner)
			}
		case []any:
			for i, c := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), c, owner)
			}
		}
	}
	for _, o := range composed {
		walk("spec", o.Object["spec"], o)
	}
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

var nsOnce sync.Map

// validate submits every composed resource of the last round to the API
// server holding the providers' CRDs (dry run, strict field validation), so
// a misspelt field or a broken CEL rule fails, and does the same with the
// XR's spec and status against the XRD's CRD.
func validate(t *testing.T, c converged) {
	t.Helper()
	ctx := t.Context()
	ns := c.input.GetNamespace()
	if _, loaded := nsOnce.LoadOrStore(ns, true); !loaded {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	strict := client.FieldValidation("Strict")
	for _, o := range c.last.Composed {
		o = o.DeepCopy()
		if o.GetName() == "" {
			o.SetName("validate-" + compositions.StableID(o.GetAnnotations()[annotationTemplate]))
		}
		if err := env.Client.Create(ctx, o, client.DryRunAll, strict); err != nil {
			t.Errorf("composed resource %q (%s) is invalid: %v", o.GetAnnotations()[annotationTemplate], o.GetKind(), err)
		}
	}

	// The XR: created as the user wrote it, then updated (dry run) with
	// everything Crossplane and the Composition wrote.
	xr := c.input.DeepCopy()
	xr.SetName(xr.GetName() + "-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))[len("testcompositions-"):])
	if err := env.Client.Create(ctx, xr, strict); err != nil {
		t.Fatalf("cannot create the input XR: %v", err)
	}
	rendered := compcheck.Applied(c.input, c.last.XR)
	rendered.SetName(xr.GetName())
	rendered.SetUID(xr.GetUID())
	rendered.SetResourceVersion(xr.GetResourceVersion())
	if err := env.Client.Update(ctx, rendered, client.DryRunAll, strict); err != nil {
		t.Errorf("the rendered XR's spec is invalid: %v", err)
	}
	if err := env.Client.Status().Update(ctx, rendered, client.DryRunAll, strict); err != nil {
		t.Errorf("the status the Composition wrote is invalid: %v", err)
	}
}

// golden compares the first render with testdata/golden/<name>.yaml.
func golden(t *testing.T, name string, out *render.Output) {
	t.Helper()
	xr := out.XR.DeepCopy()
	conds, _, _ := unstructured.NestedSlice(xr.Object, "status", "conditions")
	for _, c := range conds {
		delete(c.(map[string]any), "lastTransitionTime") // the time of the run
	}
	if conds != nil {
		_ = unstructured.SetNestedSlice(xr.Object, conds, "status", "conditions")
	}
	docs := []any{xr.Object}
	composed := append([]*unstructured.Unstructured(nil), out.Composed...)
	sort.Slice(composed, func(i, j int) bool {
		return composed[i].GetAnnotations()[annotationTemplate] < composed[j].GetAnnotations()[annotationTemplate]
	})
	for _, c := range composed {
		docs = append(docs, c.Object)
	}
	var b strings.Builder
	b.WriteString("# The first render of a Composition; regenerate with\n# go test ./compositions -run TestCompositions -update\n")
	for _, d := range docs {
		raw, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(raw)
	}
	file := filepath.Join("testdata", "golden", name+".yaml")
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), b.String()); diff != "" {
		t.Errorf("first render differs from %s (-want +got; run with -update if intended):\n%s", file, diff)
	}
}

func byTemplate(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		out[o.GetAnnotations()[annotationTemplate]] = o
	}
	return out
}

func condition(o *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return map[string]any{}
}

func hasEvent(events []render.Event, typ, substr string) bool {
	for _, e := range events {
		if e.Type == typ && strings.Contains(e.Message, substr) {
			return true
		}
	}
	return false
}

func testdata(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	dir := "testdata"
	if _, err := os.Stat(filepath.Join("examples", name)); err == nil {
		dir = "examples"
	}
	raw, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// xrd is the shipped XRD of an XR's kind.
func xrd(t *testing.T, xr *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	x, err := compositions.Read("xrds/" + strings.ToLower(xr.GetKind()) + "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// str reads a string field; a missing one fails the test.
func str(t *testing.T, o *unstructured.Unstructured, path string) string {
	t.Helper()
	if o == nil {
		t.Fatalf("no object to read %s from", path)
	}
	s, err := fieldpath.Pave(o.Object).GetString(path)
	if err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return s
}

// assertFields compares fields of an object; numbers compare as int64.
func assertFields(t *testing.T, o *unstructured.Unstructured, want map[string]any) {
	t.Helper()
	p := fieldpath.Pave(o.Object)
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		got, err := p.GetValue(k)
		if err != nil {
			t.Errorf("%s %s: %s: %v", o.GetKind(), o.GetName(), k, err)
			continue
		}
		if f, ok := got.(float64); ok {
			got = int64(f)
		}
		if got != want[k] {
			t.Errorf("%s %s: %s = %v (%T), want %v (%T)", o.GetKind(), o.GetName(), k, got, got, want[k], want[k])
		}
	}
}

func assertLen(t *testing.T, o *unstructured.Unstructured, path string, n int) {
	t.Helper()
	v, err := fieldpath.Pave(o.Object).GetValue(path)
	l, ok := v.([]any)
	if err != nil || !ok || len(l) != n {
		t.Errorf("%s: want a list of %d, got %v (%v)", path, n, v, err)
	}
}
