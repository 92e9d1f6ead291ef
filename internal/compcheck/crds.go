package compcheck

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	"github.com/capxp/cluster-api-provider-crossplane/packages"
)

// CRDs validates composed resources against the CRDs of their kinds,
// offline, as the API server does on a create with strict field
// validation: the schema's defaults applied, then unknown fields, the
// OpenAPI schema and the CEL rules each an error.
type CRDs struct {
	kinds map[schema.GroupVersionKind]*crdVersion
}

type crdVersion struct {
	structural *structuralschema.Structural
	schema     validation.SchemaCreateValidator
	cel        *cel.Validator
}

// LoadCRDs reads every CRD in the YAML files named (one CRD per file) and
// in the directories named (their *.yaml files).
func LoadCRDs(paths ...string) (*CRDs, error) {
	c := &CRDs{kinds: map[schema.GroupVersionKind]*crdVersion{}}
	for _, p := range paths {
		files := []string{p}
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			if files, err = filepath.Glob(filepath.Join(p, "*.yaml")); err != nil {
				return nil, errors.Wrapf(err, "cannot list %s", p)
			}
		}
		for _, f := range files {
			if err := c.load(f); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

func (c *CRDs) load(file string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return errors.Wrap(err, "cannot read CRD")
	}
	crd := &extv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		return errors.Wrapf(err, "%s: cannot decode", file)
	}
	if crd.Kind != "CustomResourceDefinition" {
		return nil
	}
	for _, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		internal := &apiextensions.JSONSchemaProps{}
		if err := extv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
			return errors.Wrapf(err, "%s version %s: cannot convert its schema", crd.Name, v.Name)
		}
		s, err := structuralschema.NewStructural(internal)
		if err != nil {
			return errors.Wrapf(err, "%s version %s: not a structural schema", crd.Name, v.Name)
		}
		sv, _, err := validation.NewSchemaValidator(internal)
		if err != nil {
			return errors.Wrapf(err, "%s version %s: cannot build its validator", crd.Name, v.Name)
		}
		gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
		c.kinds[gvk] = &crdVersion{structural: s, schema: sv, cel: cel.NewValidator(s, true, celconfig.PerCallLimit)}
	}
	return nil
}

// Len is how many kinds' versions are known.
func (c *CRDs) Len() int { return len(c.kinds) }

// Validate checks one object. It reports false when no CRD defines its
// kind and version.
func (c *CRDs) Validate(ctx context.Context, obj *unstructured.Unstructured) (bool, field.ErrorList) {
	v, ok := c.kinds[obj.GroupVersionKind()]
	if !ok {
		return false, nil
	}
	o := obj.DeepCopy().Object
	structuraldefaulting.Default(o, v.structural)
	var errs field.ErrorList
	unknown := structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}
	for _, p := range pruning.PruneWithOptions(o, v.structural, true, unknown) {
		errs = append(errs, field.Forbidden(field.NewPath(p), "unknown field: the CRD does not define it"))
	}
	errs = append(errs, validation.ValidateCustomResource(nil, o, v.schema)...)
	celErrs, _ := v.cel.Validate(ctx, nil, v.structural, o, nil, celconfig.RuntimeCELCostBudget)
	return true, append(errs, celErrs...)
}

// validForCRDs: every composed resource is valid for its kind's CRD.
func validForCRDs(ctx context.Context, crds *CRDs, composed []*unstructured.Unstructured) Verdict {
	var bad []string
	for _, o := range composed {
		what := fmt.Sprintf("%s %s", o.GetKind(), o.GetAnnotations()["crossplane.io/composition-resource-name"])
		known, errs := crds.Validate(ctx, o)
		switch {
		case !known:
			bad = append(bad, fmt.Sprintf("%s: no CRD of %s", what, o.GroupVersionKind()))
		case len(errs) > 0:
			bad = append(bad, fmt.Sprintf("%s: %s", what, errs.ToAggregate().Error()))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return Verdict{Field: FieldValid, Reason: strings.Join(bad, "; ")}
	}
	return Verdict{Field: FieldValid, OK: true, Reason: fmt.Sprintf("%d composed resource(s) valid for their CRDs", len(composed))}
}

// ProviderCRDDirs are the CRD directories of the Configuration's providers
// as hack/ensure-tools.sh stages them in d: provider-kubernetes' package,
// and the AWS family's (staged once as provider-aws).
func ProviderCRDDirs(d tools.Dir) ([]string, error) {
	deps, err := packages.Dependencies("Provider")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var dirs []string
	for _, dep := range deps {
		name := dep.Name()
		if strings.HasPrefix(name, "provider-aws-") || name == "provider-family-aws" {
			name = "provider-aws"
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		pkg := filepath.Join(string(d), name+"-"+dep.Version, "package", "crds")
		if _, err := os.Stat(pkg); err != nil {
			return nil, errors.Errorf("no CRDs of %s %s in %s: run `hack/ensure-tools.sh %s`, or name the CRDs with --crds", name, dep.Version, pkg, name)
		}
		dirs = append(dirs, pkg)
	}
	return dirs, nil
}
