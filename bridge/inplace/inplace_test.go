package inplace

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

func TestDeclared(t *testing.T) {
	cases := map[string]struct {
		reason string
		// bootstrap reads the bootstrap declaration, with the XR's beside
		// it, instead of the XR's.
		bootstrap bool
		value     string
		want      []string
		wantErr   string
	}{
		"BootstrapFiles": {
			reason:    "the bootstrap config's files, read from their own annotation",
			bootstrap: true,
			value:     "spec.files, spec.ntp",
			want:      []string{"spec.files", "spec.ntp"},
		},
		"BootstrapNoXRExclusions": {
			reason:    "the XR's fields that never change in place are not the bootstrap config's: its spec.bootstrap is a field like any other",
			bootstrap: true,
			value:     "spec.bootstrap",
			want:      []string{"spec.bootstrap"},
		},
		"BootstrapNotSpec": {
			reason:    "only the bootstrap config's spec is declared",
			bootstrap: true,
			value:     "metadata.annotations",
			wantErr:   "is not a field of the bootstrap config's spec",
		},
		"BootstrapNone": {
			reason:    "a Composition that declares the XR's fields only declares no bootstrap field",
			bootstrap: true,
		},
		"None": {
			reason: "a Composition without the annotation declares nothing in place",
		},
		"Two": {
			reason: "paths are trimmed and kept as written",
			value:  " spec.parameters.size , spec.parameters.rootVolume",
			want:   []string{"spec.parameters.size", "spec.parameters.rootVolume"},
		},
		"Credentials": {
			reason:  "the credentials never change in place, whatever is declared",
			value:   "spec.parameters.size,spec.providerConfigRef.name",
			wantErr: "spec.providerConfigRef.name never changes in place",
		},
		"Selection": {
			reason:  "nor does the Composition's selection",
			value:   "spec.crossplane",
			wantErr: "spec.crossplane never changes in place",
		},
		"NotSpec": {
			reason:  "only the XR's spec is declared",
			value:   "metadata.labels",
			wantErr: "is not a field of the XR's spec",
		},
		"WholeSpec": {
			reason:  "the whole spec would cover the credentials",
			value:   "spec",
			wantErr: "is not a field of the XR's spec",
		},
		"ListElement": {
			reason:  "a list changes as a whole",
			value:   "spec.parameters.tags[0]",
			wantErr: "names fields only",
		},
		"Empty": {
			reason:  "an empty entry is a typo, not nothing",
			value:   "spec.parameters.size,,",
			wantErr: "empty path",
		},
		"TooMany": {
			reason:  "a declaration is bounded",
			value:   strings.Repeat("spec.parameters.a,", maxFields) + "spec.parameters.b",
			wantErr: "more than 64",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := Declared(map[string]string{infrav1.InPlaceFieldsAnnotation: tc.value})
			if tc.bootstrap {
				f, err = DeclaredBootstrap(map[string]string{
					infrav1.InPlaceBootstrapFieldsAnnotation: tc.value,
					infrav1.InPlaceFieldsAnnotation:          "spec.parameters.size",
				})
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nDeclared(%q): error %v, want one containing %q", tc.reason, tc.value, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nDeclared(%q): %v", tc.reason, tc.value, err)
			}
			if diff := cmp.Diff(tc.want, f.Paths(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nDeclared(%q): -want, +got:\n%s", tc.reason, tc.value, diff)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	sized := func(size string) map[string]any {
		return map[string]any{
			"parameters":    map[string]any{"size": size, "image": "ami-1"},
			"crossplane":    map[string]any{"compositionSelector": map[string]any{"matchLabels": map[string]any{"capxp.dev/backend": "local"}}},
			"providerID":    "capxp-local:///ns/m",
			"bootstrap":     map[string]any{"dataSecretRef": map[string]any{"name": "m"}},
			"failureDomain": "a",
		}
	}
	declares := func(name, value string) Revision {
		f, err := Declared(map[string]string{infrav1.InPlaceFieldsAnnotation: value})
		if err != nil {
			t.Fatal(err)
		}
		return Revision{Name: name, Fields: f}
	}
	with := func(spec map[string]any, path string, v any) map[string]any {
		segs := strings.Split(path, ".")
		if err := unstructured.SetNestedField(spec, v, segs...); err != nil {
			t.Fatal(err)
		}
		return spec
	}
	cases := map[string]struct {
		reason           string
		current, desired map[string]any
		revisions        []Revision
		want             Decision
		updatable        bool
	}{
		"Nothing": {
			reason:    "no change is CAPI's to judge: nothing is refused",
			current:   sized("small"),
			desired:   sized("small"),
			revisions: []Revision{declares("m-1", "spec.parameters.size")},
			updatable: true,
		},
		"Declared": {
			reason:    "a change every running machine's revision declares is taken in place",
			current:   sized("small"),
			desired:   sized("large"),
			revisions: []Revision{declares("m-1", "spec.parameters.size"), declares("m-2", "spec.parameters")},
			want:      Decision{Changed: []string{"spec.parameters.size"}, InPlace: []string{"spec.parameters.size"}},
			updatable: true,
		},
		"OneRevisionDoesNot": {
			reason:    "one machine pinned to a revision that does not declare it replaces them all",
			current:   sized("small"),
			desired:   sized("large"),
			revisions: []Revision{declares("m-1", "spec.parameters.size"), declares("m-0", "")},
			want: Decision{Changed: []string{"spec.parameters.size"},
				Refused: []string{"spec.parameters.size: CompositionRevision m-0 does not declare it in place (capxp.dev/in-place-fields)"}},
		},
		"Undeclared": {
			reason:    "a field no revision declares is refused, and the declared one beside it still listed",
			current:   sized("small"),
			desired:   with(sized("large"), "parameters.image", "ami-2"),
			revisions: []Revision{declares("m-1", "spec.parameters.size")},
			want: Decision{Changed: []string{"spec.parameters.image", "spec.parameters.size"}, InPlace: []string{"spec.parameters.size"},
				Refused: []string{"spec.parameters.image: CompositionRevision m-1 does not declare it in place (capxp.dev/in-place-fields)"}},
		},
		"Credentials": {
			reason:    "moving a machine to other credentials replaces it",
			current:   sized("small"),
			desired:   with(sized("small"), "providerConfigRef.name", "other"),
			revisions: []Revision{declares("m-1", "spec.parameters")},
			want: Decision{Changed: []string{"spec.providerConfigRef"},
				Refused: []string{"spec.providerConfigRef never changes in place: a machine moves to other credentials only by being replaced, and judged as a new machine"}},
		},
		"Selection": {
			reason:    "selecting another Composition replaces the machine",
			current:   sized("small"),
			desired:   with(sized("small"), "crossplane.compositionSelector.matchLabels.capxp\\.dev/backend", "aws"),
			revisions: []Revision{declares("m-1", "spec.parameters")},
		},
		"Added": {
			reason:    "a field set where there was none is a change of it",
			current:   sized("small"),
			desired:   with(sized("small"), "parameters.rootVolume.sizeGiB", int64(50)),
			revisions: []Revision{declares("m-1", "spec.parameters.rootVolume")},
			want:      Decision{Changed: []string{"spec.parameters.rootVolume"}, InPlace: []string{"spec.parameters.rootVolume"}},
			updatable: true,
		},
		"NumbersByValue": {
			reason:    "an integer decoded by the API server equals the same number decoded by encoding/json",
			current:   with(sized("small"), "parameters.rootVolume.sizeGiB", int64(50)),
			desired:   with(sized("small"), "parameters.rootVolume.sizeGiB", float64(50)),
			updatable: true,
		},
		"BrokenRevision": {
			reason:    "a revision whose declaration cannot be read covers nothing, and says why",
			current:   sized("small"),
			desired:   sized("large"),
			revisions: []Revision{{Name: "m-1", Err: errTest}},
			want: Decision{Changed: []string{"spec.parameters.size"},
				Refused: []string{"spec.parameters.size: CompositionRevision m-1: " + errTest.Error()}},
		},
		"NoRevision": {
			reason:  "with no running machine's revision known, nothing is taken in place",
			current: sized("small"),
			desired: sized("large"),
			want: Decision{Changed: []string{"spec.parameters.size"},
				Refused: []string{"spec.parameters.size: no running machine's Composition revision is known"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Decide(tc.current, tc.desired, tc.revisions)
			if name == "Selection" {
				// The selector's label key holds a dot: only its shape is checked.
				if got.Updatable() || len(got.Refused) != 1 || !strings.HasPrefix(got.Refused[0], "spec.crossplane.compositionSelector") {
					t.Errorf("%s\nDecide(): %+v", tc.reason, got)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nDecide(): -want, +got:\n%s", tc.reason, diff)
			}
			if got.Updatable() != tc.updatable {
				t.Errorf("%s\nUpdatable(): %t, want %t", tc.reason, got.Updatable(), tc.updatable)
			}
		})
	}
}

func TestDecideBootstrap(t *testing.T) {
	files := func(content string) map[string]any {
		return map[string]any{
			"files":              []any{map[string]any{"path": "/tmp/test", "content": content}},
			"joinConfiguration":  map[string]any{"nodeRegistration": map[string]any{"kubeletExtraArgs": []any{}}},
			"preKubeadmCommands": []any{"echo hi"},
		}
	}
	revision := func(name, infra, bootstrap string) Revision {
		f, err := Declared(map[string]string{infrav1.InPlaceFieldsAnnotation: infra})
		if err != nil {
			t.Fatal(err)
		}
		b, err := DeclaredBootstrap(map[string]string{infrav1.InPlaceBootstrapFieldsAnnotation: bootstrap})
		if err != nil {
			t.Fatal(err)
		}
		return Revision{Name: name, Fields: f, Bootstrap: b}
	}
	cases := map[string]struct {
		reason           string
		current, desired map[string]any
		revisions        []Revision
		want             Decision
	}{
		"Files": {
			reason:    "a file every revision's hosts apply is taken in place",
			current:   files("first"),
			desired:   files("second"),
			revisions: []Revision{revision("m-1", "spec.parameters.size", "spec.files"), revision("m-2", "", "spec.files")},
			want:      Decision{Changed: []string{"spec.files"}, InPlace: []string{"spec.files"}},
		},
		"InfraDeclarationIsNotBootstrap": {
			reason:    "what the XR's annotation declares says nothing of the hosts",
			current:   files("first"),
			desired:   files("second"),
			revisions: []Revision{revision("m-1", "spec.parameters.size", "")},
			want: Decision{Changed: []string{"spec.files"},
				Refused: []string{"spec.files: CompositionRevision m-1 does not declare it in place (capxp.dev/in-place-bootstrap-fields)"}},
		},
		"Commands": {
			reason:    "a bootstrap field the hosts are not declared to apply replaces the machine",
			current:   files("first"),
			desired:   map[string]any{"files": files("first")["files"], "preKubeadmCommands": []any{"echo bye"}, "joinConfiguration": files("first")["joinConfiguration"]},
			revisions: []Revision{revision("m-1", "", "spec.files")},
			want: Decision{Changed: []string{"spec.preKubeadmCommands"},
				Refused: []string{"spec.preKubeadmCommands: CompositionRevision m-1 does not declare it in place (capxp.dev/in-place-bootstrap-fields)"}},
		},
		"Nothing": {
			reason:    "no bootstrap change is nothing to judge",
			current:   files("first"),
			desired:   files("first"),
			revisions: []Revision{revision("m-1", "", "")},
		},
		"BrokenRevision": {
			reason:    "a revision whose declarations cannot be read covers no bootstrap field either",
			current:   files("first"),
			desired:   files("second"),
			revisions: []Revision{{Name: "m-1", Err: errTest}},
			want: Decision{Changed: []string{"spec.files"},
				Refused: []string{"spec.files: CompositionRevision m-1: " + errTest.Error()}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DecideBootstrap(tc.current, tc.desired, tc.revisions)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nDecideBootstrap(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("cannot read it")

func TestMergePatch(t *testing.T) {
	desired := map[string]any{"parameters": map[string]any{"size": "large", "rootVolume": map[string]any{"sizeGiB": int64(50)}}}
	cases := map[string]struct {
		reason string
		at     []string
		fields []string
		want   string
	}{
		"Template": {
			reason: "a template's spec sits under spec.template.spec",
			at:     []string{"spec", "template", "spec"},
			fields: []string{"spec.parameters.size"},
			want:   `{"spec":{"template":{"spec":{"parameters":{"size":"large"}}}}}`,
		},
		"XR": {
			reason: "an XR's spec is its spec; two fields of one object share it",
			at:     []string{"spec"},
			fields: []string{"spec.parameters.size", "spec.parameters.rootVolume"},
			want:   `{"spec":{"parameters":{"rootVolume":{"sizeGiB":50},"size":"large"}}}`,
		},
		"Removed": {
			reason: "a field desired no longer has is removed",
			at:     []string{"spec"},
			fields: []string{"spec.parameters.image"},
			want:   `{"spec":{"parameters":{"image":null}}}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := MergePatch(tc.at, desired, tc.fields)
			if err != nil {
				t.Fatalf("%s\nMergePatch(): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("%s\nMergePatch(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestProgress(t *testing.T) {
	cond := func(typ, status string, gen int64) map[string]any {
		return map[string]any{"type": typ, "status": status, "observedGeneration": gen, "reason": "Available"}
	}
	object := func(kind string, gen int64, conds ...any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.org/v1", "kind": kind,
			"metadata": map[string]any{"name": strings.ToLower(kind), "generation": gen},
			"status":   map[string]any{"conditions": conds},
		}}
		return u
	}
	xr := func(gen int64, conds ...any) *composite.Unstructured {
		return &composite.Unstructured{Unstructured: *object("CrossplaneMachine", gen, conds...)}
	}
	settled := object("Object", 3, cond("Synced", "True", 3), cond("Ready", "True", 3))
	cases := map[string]struct {
		reason   string
		xr       *composite.Unstructured
		composed []*unstructured.Unstructured
		missing  []string
		want     string
	}{
		"Done": {
			reason:   "the XR and what it composed have all taken their current generation",
			xr:       xr(2, cond("Synced", "True", 2), cond("Ready", "True", 2)),
			composed: []*unstructured.Unstructured{settled},
		},
		"XRNotYet": {
			reason:   "CAPI's change made a generation Crossplane has not composed yet",
			xr:       xr(3, cond("Synced", "True", 2), cond("Ready", "True", 2)),
			composed: []*unstructured.Unstructured{settled},
			want:     "the composite resource: Crossplane reported Ready for generation 2; waiting for generation 3",
		},
		"ComposedNotYet": {
			reason:   "Crossplane changed the composed resource, and its provider has not applied it yet",
			xr:       xr(2, cond("Synced", "True", 2), cond("Ready", "True", 2)),
			composed: []*unstructured.Unstructured{object("Object", 4, cond("Synced", "True", 3), cond("Ready", "True", 3))},
			want:     "Object object: Synced for generation 3; waiting for generation 4",
		},
		"ComposedFailing": {
			reason:   "a provider failing to apply the change says so",
			xr:       xr(2, cond("Synced", "True", 2), cond("Ready", "True", 2)),
			composed: []*unstructured.Unstructured{object("Object", 4, map[string]any{"type": "Synced", "status": "False", "observedGeneration": int64(4), "message": "cannot update"})},
			want:     "Object object: Synced is False: cannot update",
		},
		"NoConditions": {
			reason:   "a plain resource without conditions is taken as it is: the XR's readiness covers it",
			xr:       xr(2, cond("Synced", "True", 2), cond("Ready", "True", 2)),
			composed: []*unstructured.Unstructured{object("ConfigMap", 4)},
		},
		"ComposedNotReady": {
			reason:   "a composed resource's readiness is the XR's to judge, by the Composition's readiness checks",
			xr:       xr(2, cond("Synced", "True", 2), cond("Ready", "True", 2)),
			composed: []*unstructured.Unstructured{object("Object", 4, cond("Synced", "True", 4), cond("Ready", "False", 4))},
		},
		"Missing": {
			reason:  "a resource the XR references and Crossplane is still creating",
			xr:      xr(2, cond("Synced", "True", 2), cond("Ready", "True", 2)),
			missing: []string{"Object node"},
			want:    "Crossplane is creating Object node",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Progress(tc.xr, tc.composed, tc.missing)
			if got.Ready != (tc.want == "") || got.Message != tc.want {
				t.Errorf("%s\nProgress(): %+v, want message %q", tc.reason, got, tc.want)
			}
		})
	}
}
