package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/internal/render"
)

// Renderer runs Crossplane's composition pipeline once (render.Engine).
type Renderer interface {
	Render(ctx context.Context, in render.Input) (*render.Output, error)
}

// NoRenderer stands for a render engine that could not start, and says
// why on each XR it would have rendered.
type NoRenderer struct{ Reason error }

// Render fails with the reason.
func (n NoRenderer) Render(context.Context, render.Input) (*render.Output, error) {
	return nil, n.Reason
}

// annotationResourceName is the Composition's name of a composed resource.
const annotationResourceName = "crossplane.io/composition-resource-name"

// Composed actions.
const (
	Created = "created"
	Deleted = "deleted"
	Changed = "changed"
)

// ComposedChange is what Crossplane will do to one composed resource.
type ComposedChange struct {
	// Resource is the Composition's name for it.
	Resource string `json:"resource"`
	Kind     string `json:"kind"`
	// Name is the resource's name; empty for one not yet created.
	Name   string `json:"name,omitempty"`
	Action string `json:"action"`
	// Fields are the fields the composition sets that change, by path.
	Fields []string `json:"fields,omitempty"`
	// Refused says why the API server will refuse the resource as
	// created or changed: the credentials it names are not its
	// namespace's to use. Crossplane then leaves it as it is.
	Refused string `json:"refused,omitempty"`
}

// Credentials judge composed resources as the admission of managed
// resources does: by the namespace's record, for the enforced providers.
type Credentials struct {
	Providers []credentials.Provider
	// Record is the namespace's; nil when it could not be read, Unread
	// says why.
	Record *infrav1.NamespaceCredentialsSpec
	Unread error
}

// annotationPaused pauses an XR for Crossplane; the bridge sets it to
// hold one.
const annotationPaused = "crossplane.io/paused"

// unjudged says that whether the bridge holds an XR is not known, when it
// names an enforced provider's config and the record could not be read.
func (c *Credentials) unjudged(xr *unstructured.Unstructured) string {
	if c == nil || c.Record != nil {
		return ""
	}
	ref, ok, _ := unstructured.NestedStringMap(xr.Object, "spec", "providerConfigRef")
	if !ok || !slices.ContainsFunc(c.Providers, func(p credentials.Provider) bool { return p.ConfigGroup == ref["apiGroup"] }) {
		return ""
	}
	return fmt.Sprintf("whether the bridge holds it for its credentials is not judged: %v", c.Unread)
}

// holds says why the bridge holds an XR whose spec.providerConfigRef names
// a config of an enforced provider its namespace may not use; empty when
// it does not, or when the record could not be read.
func (c *Credentials) holds(xr *unstructured.Unstructured) string {
	if c == nil || c.Record == nil {
		return ""
	}
	ref, ok, _ := unstructured.NestedStringMap(xr.Object, "spec", "providerConfigRef")
	if !ok || !slices.ContainsFunc(c.Providers, func(p credentials.Provider) bool { return p.ConfigGroup == ref["apiGroup"] }) {
		return ""
	}
	if credentials.Admits(c.Record, ref["apiGroup"], ref["kind"], ref["name"]) {
		return ""
	}
	return fmt.Sprintf("its providerConfigRef names %s %s/%s, which namespace %s may not use: the bridge holds it and nothing of it is composed", ref["kind"], ref["apiGroup"], ref["name"], xr.GetNamespace())
}

// judge sets Refused on each created or changed resource whose
// credentials the namespace may not use, and says when it cannot judge.
func (c *Credentials) judge(ns string, desired []*unstructured.Unstructured, changes []ComposedChange) ([]ComposedChange, []string) {
	if c == nil {
		return changes, nil
	}
	byName := map[string]*unstructured.Unstructured{}
	for _, d := range desired {
		byName[d.GetAnnotations()[annotationResourceName]] = d
	}
	var unknown []string
	for i := range changes {
		ch := &changes[i]
		d, ok := byName[ch.Resource]
		if !ok || ch.Action == Deleted {
			continue
		}
		group := d.GroupVersionKind().Group
		idx := slices.IndexFunc(c.Providers, func(p credentials.Provider) bool { return p.Manages(group) })
		if idx < 0 {
			continue
		}
		if c.Record == nil {
			unknown = append(unknown, fmt.Sprintf("the credentials of %s %s are not judged: %v", d.GetKind(), ch.Resource, c.Unread))
			continue
		}
		kind, _, _ := unstructured.NestedString(d.Object, "spec", "providerConfigRef", "kind")
		name, _, _ := unstructured.NestedString(d.Object, "spec", "providerConfigRef", "name")
		cfg := c.Providers[idx].ConfigGroup
		if !credentials.Admits(c.Record, cfg, kind, name) {
			if kind == "" {
				kind = string(infrav1.ProviderConfigKindCluster)
			}
			if name == "" {
				name = "default"
			}
			ch.Refused = fmt.Sprintf("namespace %s may not use %s %s/%s (its NamespaceCredentials does not list it)", ns, kind, cfg, name)
		}
	}
	return changes, unknown
}

// XR is the prediction for one composite resource the change reaches.
type XR struct {
	Kind        string `json:"kind"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	Composition string `json:"composition"`
	// Edited are the XR's own fields the change sets (its spec, labels and
	// annotations), for an XR the change or CAPI's topology controller
	// edits.
	Edited []string `json:"edited,omitempty"`
	// Held says why the bridge will hold the XR (it names credentials its
	// namespace may not use): nothing of it is composed until they are
	// granted.
	Held    string           `json:"held,omitempty"`
	Changes []ComposedChange `json:"changes,omitempty"`
	// Unknown says what plan cannot know of this XR's resources.
	Unknown []string `json:"unknown,omitempty"`
}

// isXR reports whether an object is a Crossplane v2 composite resource.
func isXR(u *unstructured.Unstructured) bool {
	_, ok, _ := unstructured.NestedMap(u.Object, "spec", "crossplane")
	return ok
}

// predictXR renders an XR as it will be after the change with the
// Composition it will use, against what it composed, and says what
// Crossplane creates, deletes and changes. What plan cannot read or render
// is said in Unknown, never guessed.
func predictXR(ctx context.Context, r client.Reader, rd Renderer, creds *Credentials, xr *unstructured.Unstructured, compositions map[string]*unstructured.Unstructured) XR {
	out := XR{Kind: xr.GetKind(), Namespace: xr.GetNamespace(), Name: xr.GetName()}
	name, _, _ := unstructured.NestedString(xr.Object, "spec", "crossplane", "compositionRef", "name")
	out.Composition = name
	if held := creds.holds(xr); held != "" {
		out.Held = held
		return out
	}
	if u := creds.unjudged(xr); u != "" {
		out.Unknown = append(out.Unknown, u)
	}
	if xr.GetAnnotations()[annotationPaused] == "true" {
		if _, hold := xr.GetAnnotations()[infrav1.CredentialsHoldAnnotation]; !hold || creds == nil || creds.Record == nil {
			out.Unknown = append(out.Unknown, "paused (crossplane.io/paused): Crossplane composes nothing of it until it is unpaused")
			return out
		}
		// Held by the bridge for credentials it may now use: the bridge
		// releases it, and Crossplane composes it.
		xr = xr.DeepCopy()
		annotations := xr.GetAnnotations()
		delete(annotations, annotationPaused)
		delete(annotations, infrav1.CredentialsHoldAnnotation)
		xr.SetAnnotations(annotations)
	}
	if name == "" {
		out.Unknown = append(out.Unknown, "its Composition is not selected yet: Crossplane selects it when it composes")
		return out
	}
	if nr, ok := rd.(NoRenderer); ok || rd == nil {
		out.Unknown = append(out.Unknown, fmt.Sprintf("composed resources not rendered: %v", nr.Reason))
		return out
	}
	comp, ok := compositions[name]
	if !ok {
		comp = &unstructured.Unstructured{}
		comp.SetAPIVersion("apiextensions.crossplane.io/v1")
		comp.SetKind("Composition")
		if err := r.Get(ctx, client.ObjectKey{Name: name}, comp); err != nil {
			out.Unknown = append(out.Unknown, fmt.Sprintf("cannot read Composition %s: %v", name, err))
			return out
		}
	}
	if to, why := reselected(ctx, r, xr, comp, compositions); why != "" {
		out.Unknown = append(out.Unknown, why)
		return out
	} else if to != nil {
		// The bridge releases the Composition, and Crossplane selects this
		// one: the XR composes with it from its newest revision.
		name, comp, xr = to.GetName(), to, xr.DeepCopy()
		out.Composition = name
		_ = unstructured.SetNestedField(xr.Object, name, "spec", "crossplane", "compositionRef", "name")
		unstructured.RemoveNestedField(xr.Object, "spec", "crossplane", "compositionRevisionRef")
	}
	if pinned(xr) {
		rev, _, _ := unstructured.NestedString(xr.Object, "spec", "crossplane", "compositionRevisionRef", "name")
		if rev != "" {
			cr := &unstructured.Unstructured{}
			cr.SetAPIVersion("apiextensions.crossplane.io/v1")
			cr.SetKind("CompositionRevision")
			if err := r.Get(ctx, client.ObjectKey{Name: rev}, cr); err != nil {
				out.Unknown = append(out.Unknown, fmt.Sprintf("cannot read CompositionRevision %s: %v", rev, err))
				return out
			}
			comp = revisionAsComposition(cr, name)
		}
	}
	observed, unknown := composedOf(ctx, r, xr)
	out.Unknown = append(out.Unknown, unknown...)
	res, err := rd.Render(ctx, render.Input{XR: xr, Composition: comp, Observed: observed})
	if err != nil {
		out.Unknown = append(out.Unknown, fmt.Sprintf("the Composition's pipeline does not render it: %v", err))
		return out
	}
	var unknown2 []string
	out.Changes, unknown2 = creds.judge(xr.GetNamespace(), res.Composed, diffComposed(observed, res.Composed))
	out.Unknown = append(out.Unknown, unknown2...)
	return out
}

// reselected is the Composition an XR composes with once its
// compositionSelector changed (an InfraCluster rebased onto a class of
// another backend): when the selector differs from the one the bridge
// recorded (its capxp.dev/composition-selector annotation, on the kinds it
// reselects for) and the Composition it composes with no longer matches it,
// the bridge releases the Composition and Crossplane selects among those of
// the XR's kind that match. Nil when the XR keeps its Composition; why says
// what plan cannot know (none or several match: Crossplane picks one then).
func reselected(ctx context.Context, r client.Reader, xr, comp *unstructured.Unstructured, proposed map[string]*unstructured.Unstructured) (*unstructured.Unstructured, string) {
	recorded, seen := xr.GetAnnotations()[infrav1.CompositionSelectorAnnotation]
	raw, ok, _ := unstructured.NestedMap(xr.Object, "spec", "crossplane", "compositionSelector")
	if !seen || !ok {
		return nil, ""
	}
	ls := &metav1.LabelSelector{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, ls); err != nil {
		return nil, ""
	}
	selector, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil || recorded == selector.String() || selector.Matches(labels.Set(comp.GetLabels())) {
		return nil, ""
	}
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("apiextensions.crossplane.io/v1")
	l.SetKind("CompositionList")
	if err := r.List(ctx, l, client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, fmt.Sprintf("its compositionSelector changed and Composition %s no longer matches it, but plan cannot list the Compositions that do: %v", comp.GetName(), err)
	}
	// The Compositions as the change leaves them: a proposed one in place
	// of the live one of its name, and the new ones.
	candidates := map[string]*unstructured.Unstructured{}
	for i := range l.Items {
		candidates[l.Items[i].GetName()] = &l.Items[i]
	}
	for name, c := range proposed {
		delete(candidates, name)
		if selector.Matches(labels.Set(c.GetLabels())) {
			candidates[name] = c
		}
	}
	var match []*unstructured.Unstructured
	for _, name := range sortedKeys(candidates) {
		c := candidates[name]
		api, _, _ := unstructured.NestedString(c.Object, "spec", "compositeTypeRef", "apiVersion")
		kind, _, _ := unstructured.NestedString(c.Object, "spec", "compositeTypeRef", "kind")
		if api == xr.GetAPIVersion() && kind == xr.GetKind() {
			match = append(match, c)
		}
	}
	if len(match) != 1 {
		return nil, fmt.Sprintf("its compositionSelector (%s) changed and %d Compositions of its kind match it: Crossplane picks one when it selects", selector, len(match))
	}
	return match[0], ""
}

// pinned reports whether an XR stays on its Composition revision (the
// Manual update policy) until someone moves it.
func pinned(xr *unstructured.Unstructured) bool {
	p, _, _ := unstructured.NestedString(xr.Object, "spec", "crossplane", "compositionUpdatePolicy")
	return p == "Manual"
}

// revisionAsComposition is a CompositionRevision as the Composition it
// was when it was made, the way render takes it.
func revisionAsComposition(rev *unstructured.Unstructured, name string) *unstructured.Unstructured {
	c := &unstructured.Unstructured{Object: map[string]any{}}
	c.SetAPIVersion("apiextensions.crossplane.io/v1")
	c.SetKind("Composition")
	c.SetName(name)
	spec, _, _ := unstructured.NestedMap(rev.Object, "spec")
	delete(spec, "revision")
	_ = unstructured.SetNestedMap(c.Object, spec, "spec")
	return c
}

// composedOf reads what an XR composed, from its resource references.
func composedOf(ctx context.Context, r client.Reader, xr *unstructured.Unstructured) ([]*unstructured.Unstructured, []string) {
	refs, _, _ := unstructured.NestedSlice(xr.Object, "spec", "crossplane", "resourceRefs")
	var out []*unstructured.Unstructured
	var unknown []string
	for _, raw := range refs {
		ref, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(fmt.Sprint(ref["apiVersion"]))
		u.SetKind(fmt.Sprint(ref["kind"]))
		ns, _ := ref["namespace"].(string)
		if ns == "" {
			ns = xr.GetNamespace()
		}
		key := client.ObjectKey{Namespace: ns, Name: fmt.Sprint(ref["name"])}
		err := r.Get(ctx, key, u)
		if err != nil && apierrors.IsNotFound(err) {
			// A cluster-scoped kind.
			key.Namespace = ""
			err = r.Get(ctx, key, u)
		}
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			unknown = append(unknown, fmt.Sprintf("cannot read composed %s %s: %v", u.GetKind(), key.Name, err))
			continue
		}
		out = append(out, u)
	}
	return out, unknown
}

// diffComposed compares what the pipeline wants with what is composed,
// by the Composition's name for each resource.
func diffComposed(observed, desired []*unstructured.Unstructured) []ComposedChange {
	have := map[string]*unstructured.Unstructured{}
	for _, o := range observed {
		have[o.GetAnnotations()[annotationResourceName]] = o
	}
	want := map[string]*unstructured.Unstructured{}
	for _, d := range desired {
		want[d.GetAnnotations()[annotationResourceName]] = d
	}
	var out []ComposedChange
	for name, d := range want {
		o, ok := have[name]
		if !ok {
			out = append(out, ComposedChange{Resource: name, Kind: d.GetKind(), Action: Created})
			continue
		}
		fields := changedFields(o.Object, d.Object, nil)
		for _, f := range removedFields(o, d) {
			if !slices.Contains(fields, f) {
				fields = append(fields, f)
			}
		}
		sort.Strings(fields)
		if len(fields) > 0 {
			out = append(out, ComposedChange{Resource: name, Kind: o.GetKind(), Name: o.GetName(), Action: Changed, Fields: fields})
		}
	}
	for name, o := range have {
		if _, ok := want[name]; !ok {
			out = append(out, ComposedChange{Resource: name, Kind: o.GetKind(), Name: o.GetName(), Action: Deleted})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out
}

// The fields of an object a change, or an apply, sets: its spec, labels and
// annotations.
const (
	fieldSpec        = "spec"
	fieldMetadata    = "metadata"
	fieldLabels      = "labels"
	fieldAnnotations = "annotations"
)

// setByApply reports whether the field k below path is one a change sets:
// spec, metadata.labels, metadata.annotations, or a field below them.
func setByApply(path []string, k string) bool {
	switch len(path) {
	case 0:
		return k == fieldSpec || k == fieldMetadata
	case 1:
		return path[0] != fieldMetadata || k == fieldLabels || k == fieldAnnotations
	}
	return true
}

// changedFields are the paths of spec, labels and annotations that desired
// sets to a value observed does not have: what Crossplane's apply changes.
func changedFields(observed, desired map[string]any, path []string) []string {
	var out []string
	for k, dv := range desired {
		p := append(slices.Clone(path), k)
		if !setByApply(path, k) {
			continue
		}
		ov, ok := observed[k]
		dm, dIsMap := dv.(map[string]any)
		om, oIsMap := ov.(map[string]any)
		switch {
		case dIsMap && oIsMap:
			out = append(out, changedFields(om, dm, p)...)
		case !ok || !sameValue(ov, dv):
			out = append(out, strings.Join(p, "."))
		}
	}
	sort.Strings(out)
	return out
}

// composedFieldOwner prefixes the field manager Crossplane applies composed
// resources with (one per XR).
const composedFieldOwner = "apiextensions.crossplane.io/composed"

// removedFields are the fields of spec, labels and annotations that
// Crossplane applied to observed (its managed fields say so) and that
// desired no longer sets: server-side apply removes them. A field inside
// a list is said as the list's path.
func removedFields(observed, desired *unstructured.Unstructured) []string {
	var out []string
	for _, mf := range observed.GetManagedFields() {
		if !strings.HasPrefix(mf.Manager, composedFieldOwner) || mf.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(mf.FieldsV1.GetRawReader()); err != nil {
			continue
		}
		set.Leaves().Iterate(func(p fieldpath.Path) {
			var names []string
			for _, e := range p {
				if e.FieldName == nil {
					break
				}
				names = append(names, *e.FieldName)
			}
			if !applied(names) {
				return
			}
			if _, ok, _ := unstructured.NestedFieldNoCopy(desired.Object, names...); ok {
				return
			}
			if f := strings.Join(names, "."); !slices.Contains(out, f) {
				out = append(out, f)
			}
		})
	}
	sort.Strings(out)
	return out
}

// applied reports whether a field is one plan compares: under spec, or a
// label or an annotation.
func applied(names []string) bool {
	switch {
	case len(names) > 0 && names[0] == "spec":
		return true
	case len(names) > 2 && names[0] == "metadata":
		return names[1] == "labels" || names[1] == "annotations"
	}
	return false
}

// sameValue compares two values as JSON: what the API server holds
// (integers) and what the pipeline returns (every number a float) are the
// same when they encode the same.
func sameValue(a, b any) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ja, jb)
}
