package gen

import (
	"strings"
	"testing"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

func TestReference(t *testing.T) {
	str := extv1.JSONSchemaProps{Type: "string"}
	cases := map[string]struct {
		kind    string
		spec    extv1.JSONSchemaProps
		want    []string
		notWant []string
	}{
		"NestedFieldsInOrderWithRequired": {
			spec: extv1.JSONSchemaProps{Type: "object", Required: []string{"b"}, Properties: map[string]extv1.JSONSchemaProps{
				"b": str, "a": {Type: "object", Description: "a holds\nthings.", Properties: map[string]extv1.JSONSchemaProps{"c": str}},
			}},
			want: []string{
				"| `spec.a` | object |  | a holds things. |\n| `spec.a.c` | string |  |  |\n| `spec.b` | string | yes |  |\n",
			},
		},
		"ArrayItemsAndMapValues": {
			spec: extv1.JSONSchemaProps{Type: "object", Properties: map[string]extv1.JSONSchemaProps{
				"list": {Type: "array", Items: &extv1.JSONSchemaPropsOrArray{Schema: &extv1.JSONSchemaProps{
					Type: "object", Required: []string{"name"}, Properties: map[string]extv1.JSONSchemaProps{"name": str},
				}}},
				"labels": {Type: "object", AdditionalProperties: &extv1.JSONSchemaPropsOrBool{Schema: &str}},
			}},
			want: []string{
				"| `spec.labels` | map[string]string |",
				"| `spec.list` | []object |",
				"| `spec.list[].name` | string | yes |",
			},
		},
		"ValidationAfterTheDescription": {
			spec: extv1.JSONSchemaProps{Type: "object", Properties: map[string]extv1.JSONSchemaProps{
				"mode": {Type: "string", Description: "mode a|b.", Enum: []extv1.JSON{{Raw: []byte(`"A"`)}, {Raw: []byte(`"B"`)}}, MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](2)},
				"n":    {Type: "integer", Format: "int32", Minimum: ptr.To(1.0), XValidations: extv1.ValidationRules{{Rule: "self > 0", Message: "n is positive"}}},
			}},
			want: []string{
				"| `spec.mode` | string |  | mode a\\|b. *one of `\"A\"`, `\"B\"`; at least 1 character; at most 2 characters* |",
				"| `spec.n` | integer (int32) |  | *minimum 1; n is positive* |",
			},
		},
		"CompositeWithoutCrossplanesFields": {
			kind: "CrossplaneCluster",
			spec: extv1.JSONSchemaProps{Type: "object", Properties: map[string]extv1.JSONSchemaProps{"crossplane": {Type: "object"}, "size": str}},
			want: []string{
				"| [CrossplaneCluster](#crossplanecluster) | XRD (InfraCluster contract) | Namespaced |",
				"| `spec.size` | string |",
			},
			notWant: []string{"| `spec.crossplane` |"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := crd(extv1.NamespaceScoped, tc.spec, extv1.JSONSchemaProps{Type: "object"}, "spec")
			if tc.kind != "" {
				c.Spec.Names.Kind = tc.kind
			}
			got := Reference([]*extv1.CustomResourceDefinition{c})
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("Reference(...): want\n%s\nin\n%s", w, got)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("Reference(...): want no %q in\n%s", w, got)
				}
			}
		})
	}
}
