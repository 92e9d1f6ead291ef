package capxp

import (
	"io/fs"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// CrossplaneSchema is the schema of spec.template.spec.crossplane in CAPXP's
// own machine template: the Composition selection Crossplane adds to every
// XR. Template CRDs generated for a platform team's XRDs
// (`capxp xrd template`) carry the same.
func CrossplaneSchema() (extv1.JSONSchemaProps, error) {
	const file = CRDsDir + "/infrastructure.cluster.x-k8s.io_crossplanemachinetemplates.yaml"
	raw, err := fs.ReadFile(Manifests, file)
	if err != nil {
		return extv1.JSONSchemaProps{}, errors.Wrapf(err, "cannot read %s", file)
	}
	crd := &extv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		return extv1.JSONSchemaProps{}, errors.Wrapf(err, "cannot decode %s", file)
	}
	for _, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		if s, ok := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["template"].Properties["spec"].Properties["crossplane"]; ok {
			return s, nil
		}
	}
	return extv1.JSONSchemaProps{}, errors.Errorf("%s has no spec.template.spec.crossplane", file)
}
