package compcheck

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	// providers are read when a kind of their groups is first validated;
	// a provider whose CRDs were not found stays here, to be named.
	providers []stagedProvider
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

// provider is the staged provider of an API group whose CRDs are not read
// yet.
func (c *CRDs) provider(group string) (stagedProvider, bool) {
	for _, p := range c.providers {
		if p.serves(group) && p.staged() {
			return p, true
		}
	}
	return stagedProvider{}, false
}

// read reads a provider's CRDs; it is no longer to be read, whether
// reading fails or not.
func (c *CRDs) read(p stagedProvider) field.ErrorList {
	c.providers = slices.DeleteFunc(c.providers, func(q stagedProvider) bool { return q.name == p.name })
	files, err := filepath.Glob(filepath.Join(p.dir, "*.yaml"))
	if err != nil {
		return field.ErrorList{field.InternalError(nil, errors.Wrapf(err, "cannot list the CRDs of %s", p.name))}
	}
	for _, f := range files {
		if err := c.load(f); err != nil {
			return field.ErrorList{field.InternalError(nil, errors.Wrapf(err, "cannot read the CRDs of %s", p.name))}
		}
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
		// The provider of its group, if it is staged and not read yet.
		if p, staged := c.provider(obj.GroupVersionKind().Group); staged {
			if errs := c.read(p); errs != nil {
				return true, errs
			}
			return c.Validate(ctx, obj)
		}
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
			reason := fmt.Sprintf("%s: no CRD of %s", what, o.GroupVersionKind())
			for _, p := range crds.providers {
				if p.serves(o.GroupVersionKind().Group) && !p.staged() {
					reason += fmt.Sprintf(": the CRDs of %s %s are not staged (%s): run `hack/ensure-tools.sh %s`, or name them with --crds", p.name, p.version, p.dir, p.name)
				}
			}
			bad = append(bad, reason)
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

// stagedProvider is one of the Configuration's providers as
// hack/ensure-tools.sh stages it: the AWS family's services once, as
// provider-aws.
type stagedProvider struct {
	name, version string
	// dir is its CRD directory in the tools directory.
	dir string
	// groups are the API groups its kinds are in (each with its
	// subgroups).
	groups []string
}

// providerGroups are the API groups each staged provider serves, with
// their subgroups, by its staged name.
var providerGroups = map[string][]string{
	"provider-aws":        {"aws.upbound.io", "aws.m.upbound.io"},
	"provider-kubernetes": {"kubernetes.crossplane.io", "kubernetes.m.crossplane.io"},
}

// serves reports whether a provider serves kinds of an API group.
func (p stagedProvider) serves(group string) bool {
	for _, g := range p.groups {
		if group == g || strings.HasSuffix(group, "."+g) {
			return true
		}
	}
	return false
}

// stagedProviders are the Configuration's providers as hack/ensure-tools.sh
// stages them in d.
func stagedProviders(d tools.Dir) ([]stagedProvider, error) {
	deps, err := packages.Dependencies("Provider")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []stagedProvider
	for _, dep := range deps {
		name := dep.Name()
		if strings.HasPrefix(name, "provider-aws-") || name == "provider-family-aws" {
			name = "provider-aws"
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		groups, ok := providerGroups[name]
		if !ok {
			return nil, errors.Errorf("the Configuration depends on %s, whose API groups the composition check does not know", name)
		}
		out = append(out, stagedProvider{name: name, version: dep.Version, groups: groups,
			dir: filepath.Join(string(d), name+"-"+dep.Version, "package", "crds")})
	}
	return out, nil
}

// ProviderCRDDirs are the CRD directories of the Configuration's providers
// as hack/ensure-tools.sh stages them in d: provider-kubernetes' package,
// and the AWS family's (staged once as provider-aws). Each must be staged.
func ProviderCRDDirs(d tools.Dir) ([]string, error) {
	providers, err := stagedProviders(d)
	if err != nil {
		return nil, err
	}
	dirs := make([]string, 0, len(providers))
	for _, p := range providers {
		if _, err := os.Stat(p.dir); err != nil {
			return nil, errors.Errorf("no CRDs of %s %s in %s: run `hack/ensure-tools.sh %s`, or name the CRDs with --crds", p.name, p.version, p.dir, p.name)
		}
		dirs = append(dirs, p.dir)
	}
	return dirs, nil
}

// ProviderCRDs are the CRDs of the Configuration's providers staged in d,
// each read when a composed resource of its API groups is first validated:
// a Composition is checked against the providers whose kinds it composes
// only. A provider that is not staged is no error: a composed resource of
// its groups is reported with how to stage it.
func ProviderCRDs(d tools.Dir) (*CRDs, error) {
	providers, err := stagedProviders(d)
	if err != nil {
		return nil, err
	}
	return &CRDs{kinds: map[schema.GroupVersionKind]*crdVersion{}, providers: providers}, nil
}

// staged reports whether the provider's CRD directory exists.
func (p stagedProvider) staged() bool {
	st, err := os.Stat(p.dir)
	return err == nil && st.IsDir()
}
