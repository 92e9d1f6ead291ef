package compcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
)

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.org
spec:
  group: example.org
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            x-kubernetes-validations:
            - rule: "self.size != 'huge' || self.zone != ''"
              message: a huge widget needs a zone
            properties:
              size: {type: string, enum: [small, huge]}
              zone: {type: string, default: ""}
`

func TestCRDsValidate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "widgets.yaml")
	if err := os.WriteFile(file, []byte(widgetCRD), 0o600); err != nil {
		t.Fatal(err)
	}
	crds, err := LoadCRDs(filepath.Dir(file))
	if err != nil {
		t.Fatal(err)
	}
	widget := func(apiVersion string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": "Widget", "metadata": map[string]any{"name": "w"}, "spec": spec}}
	}
	cases := map[string]struct {
		reason string
		obj    *unstructured.Unstructured
		known  bool
		says   string
	}{
		"Valid":        {reason: "a valid object", obj: widget("example.org/v1", map[string]any{"size": "small"}), known: true},
		"UnknownField": {reason: "a field the schema does not define", obj: widget("example.org/v1", map[string]any{"size": "small", "colour": "red"}), known: true, says: "spec.colour: Forbidden: unknown field"},
		"Required":     {reason: "a required field missing", obj: widget("example.org/v1", map[string]any{}), known: true, says: "spec.size: Required value"},
		"Enum":         {reason: "a value the enum does not allow", obj: widget("example.org/v1", map[string]any{"size": "medium"}), known: true, says: `spec.size: Unsupported value: "medium"`},
		"CELRule":      {reason: "a CEL rule broken (after defaulting zone to empty)", obj: widget("example.org/v1", map[string]any{"size": "huge"}), known: true, says: "a huge widget needs a zone"},
		"UnknownKind":  {reason: "a version no CRD defines", obj: widget("example.org/v2", map[string]any{"size": "small"})},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			known, errs := crds.Validate(t.Context(), tc.obj)
			got := errs.ToAggregate()
			switch {
			case known != tc.known:
				t.Errorf("%s: known = %t, want %t", tc.reason, known, tc.known)
			case tc.says == "" && got != nil:
				t.Errorf("%s: %v, want no error", tc.reason, got)
			case tc.says != "" && (got == nil || !strings.Contains(got.Error(), tc.says)):
				t.Errorf("%s: %v, want an error saying %q", tc.reason, got, tc.says)
			}
		})
	}
}

// TestProviderCRDsOfTheProvidersUsed: a tools directory that stages only
// provider-kubernetes checks what the local Composition composes, and names
// the provider to stage for a composed resource of another's groups.
func TestProviderCRDsOfTheProvidersUsed(t *testing.T) {
	providers, err := stagedProviders("")
	if err != nil {
		t.Fatalf("the Configuration's providers: %v", err)
	}
	d := tools.Dir(t.TempDir())
	var kubernetes stagedProvider
	for _, p := range providers {
		if p.name == "provider-kubernetes" {
			kubernetes = p
		}
	}
	dir := filepath.Join(string(d), kubernetes.name+"-"+kubernetes.version, "package", "crds")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	object := strings.NewReplacer("widgets.example.org", "objects.kubernetes.m.crossplane.io", "group: example.org", "group: kubernetes.m.crossplane.io",
		"kind: Widget, plural: widgets", "kind: Object, plural: objects").Replace(widgetCRD)
	if err := os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte(object), 0o600); err != nil {
		t.Fatal(err)
	}
	crds, err := ProviderCRDs(d)
	if err != nil {
		t.Fatalf("with provider-aws not staged: %v, want no error", err)
	}
	composed := func(apiVersion, kind string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": "x", "annotations": map[string]any{"crossplane.io/composition-resource-name": "x"}},
			"spec":     map[string]any{"size": "small"}}}
	}
	cases := map[string]struct {
		obj  *unstructured.Unstructured
		ok   bool
		says string
	}{
		"StagedProvider":   {obj: composed("kubernetes.m.crossplane.io/v1", "Object"), ok: true},
		"UnstagedProvider": {obj: composed("ec2.aws.m.upbound.io/v1beta1", "Instance"), says: "the CRDs of provider-aws v"},
		"NoProvider":       {obj: composed("example.org/v1", "Widget"), says: "no CRD of example.org/v1, Kind=Widget"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := validForCRDs(t.Context(), crds, []*unstructured.Unstructured{tc.obj})
			if v.OK != tc.ok || !strings.Contains(v.Reason, tc.says) {
				t.Errorf("%+v, want ok %t saying %q", v, tc.ok, tc.says)
			}
			if name == "NoProvider" && strings.Contains(v.Reason, "not staged") {
				t.Errorf("%q names a provider for a kind no provider serves", v.Reason)
			}
		})
	}
}
