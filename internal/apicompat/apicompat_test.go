package apicompat

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// crd is a CRD of kind Widget whose v1 schema's spec is given.
func crd(scope, spec string, versions ...string) string {
	if len(versions) == 0 {
		versions = []string{"v1:true"}
	}
	b := &strings.Builder{}
	b.WriteString("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.org\nspec:\n  group: example.org\n  names:\n    kind: Widget\n    plural: widgets\n  scope: " + scope + "\n  versions:\n")
	for _, v := range versions {
		name, served, _ := strings.Cut(v, ":")
		b.WriteString("  - name: " + name + "\n    served: " + served + "\n    storage: " + served + "\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n" + indent(spec, "            "))
	}
	return b.String()
}

func indent(s, by string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = by + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

const base = `type: object
required: [size]
properties:
  size:
    type: integer
    minimum: 1
    maximum: 10
  mode:
    type: string
    enum: [fast, slow]
    maxLength: 8
  tags:
    type: array
    items:
      type: object
      properties:
        key: {type: string}
  labels:
    type: object
    additionalProperties:
      type: string
`

func TestBreaking(t *testing.T) {
	cases := map[string]struct {
		next string
		want []string
	}{
		"unchanged": {next: crd("Namespaced", base)},
		"a new optional field and enum value, a wider range": {
			next: crd("Namespaced", strings.NewReplacer("maximum: 10", "maximum: 20", "[fast, slow]", "[fast, slow, idle]").Replace(base)+"  extra: {type: string}\n"),
		},
		"a new served version beside": {next: crd("Namespaced", base, "v1:true", "v2:true")},
		"a field removed": {
			next: crd("Namespaced", strings.Replace(base, "  mode:\n    type: string\n    enum: [fast, slow]\n    maxLength: 8\n", "", 1)),
			want: []string{"Widget example.org: v1: spec.mode removed"},
		},
		"a field retyped": {
			next: crd("Namespaced", strings.Replace(base, "type: integer", "type: string", 1)),
			want: []string{`Widget example.org: v1: spec.size: type "integer" became "string"`},
		},
		"a field newly required": {
			next: crd("Namespaced", strings.Replace(base, "required: [size]", "required: [size, mode]", 1)),
			want: []string{`Widget example.org: v1: spec: "mode" became required`},
		},
		"an enum value removed": {
			next: crd("Namespaced", strings.Replace(base, "[fast, slow]", "[fast]", 1)),
			want: []string{`Widget example.org: v1: spec.mode: enum value "slow" removed`},
		},
		"ranges narrowed": {
			next: crd("Namespaced", strings.NewReplacer("minimum: 1", "minimum: 2", "maxLength: 8", "maxLength: 4").Replace(base)),
			want: []string{"Widget example.org: v1: spec.mode: maxLength 8 became 4", "Widget example.org: v1: spec.size: minimum 1 became 2"},
		},
		"a field of an array's items removed": {
			next: crd("Namespaced", strings.Replace(base, "        key: {type: string}\n", "        value: {type: string}\n", 1)),
			want: []string{"Widget example.org: v1: spec.tags[].key removed"},
		},
		"a map's values retyped": {
			next: crd("Namespaced", strings.Replace(base, "    additionalProperties:\n      type: string", "    additionalProperties:\n      type: integer", 1)),
			want: []string{`Widget example.org: v1: spec.labels{}: type "string" became "integer"`},
		},
		"the scope changed": {
			next: crd("Cluster", base),
			want: []string{`Widget example.org: scope changed from "Namespaced" to "Cluster"`},
		},
		"the version no longer served": {
			next: crd("Namespaced", base, "v1:false", "v2:true"),
			want: []string{"Widget example.org: version v1 no longer served"},
		},
		"the version removed": {
			next: crd("Namespaced", base, "v2:true"),
			want: []string{"Widget example.org: version v1 removed while served"},
		},
	}
	prev, err := Read("prev", []byte(crd("Namespaced", base)))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			next, err := Read("next", []byte(tc.next))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, Breaking(prev, next)); diff != "" {
				t.Errorf("Breaking(): -want, +got:\n%s", diff)
			}
		})
	}
}

func TestReadXRD(t *testing.T) {
	xrd := `apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: gadgets.example.org
spec:
  group: example.org
  scope: Namespaced
  names: {kind: Gadget, plural: gadgets}
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`
	prev, err := Read("xrd", []byte(xrd))
	if err != nil {
		t.Fatal(err)
	}
	next, err := Read("xrd", []byte(strings.Replace(xrd, "size: {type: integer}", "count: {type: integer}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Gadget example.org: v1alpha1: spec.size removed"}
	if diff := cmp.Diff(want, Breaking(prev, next)); diff != "" {
		t.Errorf("Breaking(): -want, +got:\n%s", diff)
	}
	if _, err := Read("other", []byte("apiVersion: v1\nkind: ConfigMap\n")); err == nil {
		t.Error("Read() of a ConfigMap: no error")
	}
}
