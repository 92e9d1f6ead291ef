package asginstances

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
)

const (
	// groupAPIGroup and groupKind identify provider-upjet-aws's namespaced
	// AutoscalingGroup, whatever its version.
	groupAPIGroup = "autoscaling.aws.m.upbound.io"
	groupKind     = "AutoscalingGroup"

	// annotationExternalName is Crossplane's annotation holding the name of a
	// managed resource's external resource.
	annotationExternalName = "crossplane.io/external-name"
)

// A group is an observed AutoscalingGroup: what AWS calls it, where it is,
// and whose credentials its provider uses.
type group struct {
	// name and namespace are the managed resource's, for messages and
	// because its namespace is where its ProviderConfig and Secret live.
	name      string
	namespace string
	// awsName is the Auto Scaling group's name in AWS: empty until the
	// provider names it.
	awsName string
	// observed is true when awsName comes from status.atProvider.id, that is
	// when the provider has seen the group in AWS. A name taken from the
	// external-name annotation may be one the provider has yet to create.
	observed bool
	region   string
	config   configRef
}

// A configRef is a managed resource's spec.providerConfigRef.
type configRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// defaultConfigRef is what provider-aws's CRDs default
// spec.providerConfigRef to.
var defaultConfigRef = configRef{Kind: kindClusterProviderConfig, Name: "default"}

// observedGroups returns the request's observed AutoscalingGroups, in the
// order of their names in the composition, so that every call reports them
// in the same order.
func observedGroups(req *fnv1.RunFunctionRequest) ([]group, error) {
	ocds, err := request.GetObservedComposedResources(req)
	if err != nil {
		return nil, errors.Wrap(err, "cannot get observed composed resources")
	}
	xrNamespace := req.GetObserved().GetComposite().GetResource().GetFields()["metadata"].GetStructValue().GetFields()["namespace"].GetStringValue()
	names := make([]string, 0, len(ocds))
	for n := range ocds {
		names = append(names, string(n))
	}
	slices.Sort(names)

	var groups []group
	for _, n := range names {
		r := ocds[resource.Name(n)].Resource
		gv, err := schema.ParseGroupVersion(r.GetAPIVersion())
		if err != nil || gv.Group != groupAPIGroup || r.GetKind() != groupKind {
			continue
		}
		g := group{name: r.GetName(), namespace: r.GetNamespace(), config: defaultConfigRef}
		if g.namespace == "" {
			// Composed resources are in their XR's namespace.
			g.namespace = xrNamespace
		}
		g.awsName, _ = r.GetString("status.atProvider.id")
		g.observed = g.awsName != ""
		if !g.observed {
			g.awsName = r.GetAnnotations()[annotationExternalName]
		}
		g.region, _ = r.GetString("spec.forProvider.region")
		if err := r.GetValueInto("spec.providerConfigRef", &g.config); err != nil && !fieldpath.IsNotFound(err) {
			return nil, errors.Wrapf(err, "cannot read spec.providerConfigRef of AutoscalingGroup %q", g.name)
		}
		groups = append(groups, g)
	}
	return groups, nil
}

// String names the group's managed resource in messages.
func (g group) String() string { return fmt.Sprintf("%s %q", groupKind, g.name) }
