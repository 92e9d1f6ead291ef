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
	"github.com/crossplane/function-sdk-go/resource/composed"
)

// The managed resources whose Auto Scaling groups the function lists,
// whatever their version.
var (
	// autoscalingGroupKind is provider-upjet-aws's namespaced
	// AutoscalingGroup: an Auto Scaling group itself.
	autoscalingGroupKind = schema.GroupKind{Group: "autoscaling.aws.m.upbound.io", Kind: "AutoscalingGroup"}
	// nodeGroupKind is provider-upjet-aws's namespaced EKS managed node
	// group, whose Auto Scaling groups EKS creates and names.
	nodeGroupKind = schema.GroupKind{Group: "eks.aws.m.upbound.io", Kind: "NodeGroup"}
)

// annotationExternalName is Crossplane's annotation holding the name of a
// managed resource's external resource.
const annotationExternalName = "crossplane.io/external-name"

// A group is an Auto Scaling group of an observed managed resource: an
// AutoscalingGroup, or one of a NodeGroup's groups. It says what AWS calls
// the group, where it is, and whose credentials its provider uses.
type group struct {
	// kind, name and namespace are the managed resource's, for messages and
	// because its namespace is where its ProviderConfig and Secret live.
	kind      string
	name      string
	namespace string
	// awsName is the Auto Scaling group's name in AWS: empty until the
	// provider names it, or until a NodeGroup reports a group.
	awsName string
	// observed is true when awsName was reported by the provider, that is
	// when the provider has seen the group in AWS: an AutoscalingGroup's
	// status.atProvider.id, or a group of a NodeGroup's status. A name taken
	// from the external-name annotation may be one the provider has yet to
	// create.
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

// nodeGroupResources is the part of a NodeGroup's status.atProvider.resources
// the function reads.
type nodeGroupResources []struct {
	AutoscalingGroups []struct {
		Name string `json:"name"`
	} `json:"autoscalingGroups"`
}

// observedGroups returns the Auto Scaling groups of the request's observed
// AutoscalingGroups and NodeGroups, in the order of the managed resources'
// names in the composition and then of a NodeGroup's groups as it reports
// them, so that every call reports them in the same order. A NodeGroup
// that reports no group yet returns one unnamed group, which list waits
// for as it waits for an AutoscalingGroup the provider has not named.
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
		if err != nil {
			continue
		}
		gk := gv.WithKind(r.GetKind()).GroupKind()
		if gk != autoscalingGroupKind && gk != nodeGroupKind {
			continue
		}
		g, err := managedBy(r, xrNamespace)
		if err != nil {
			return nil, err
		}
		if gk == autoscalingGroupKind {
			g.awsName, _ = r.GetString("status.atProvider.id")
			g.observed = g.awsName != ""
			if !g.observed {
				g.awsName = r.GetAnnotations()[annotationExternalName]
			}
			groups = append(groups, g)
			continue
		}
		asgs, err := nodeGroupASGs(r)
		if err != nil {
			return nil, errors.Wrapf(err, "cannot read the Auto Scaling groups of %s", g)
		}
		if len(asgs) == 0 {
			groups = append(groups, g)
			continue
		}
		for _, name := range asgs {
			ng := g
			ng.awsName, ng.observed = name, true
			groups = append(groups, ng)
		}
	}
	return groups, nil
}

// managedBy returns an unnamed group of the managed resource r: its kind,
// name, namespace (its XR's when it has none), region and
// spec.providerConfigRef.
func managedBy(r *composed.Unstructured, xrNamespace string) (group, error) {
	g := group{kind: r.GetKind(), name: r.GetName(), namespace: r.GetNamespace(), config: defaultConfigRef}
	if g.namespace == "" {
		// Composed resources are in their XR's namespace.
		g.namespace = xrNamespace
	}
	g.region, _ = r.GetString("spec.forProvider.region")
	if err := r.GetValueInto("spec.providerConfigRef", &g.config); err != nil && !fieldpath.IsNotFound(err) {
		return group{}, errors.Wrapf(err, "cannot read spec.providerConfigRef of %s", g)
	}
	return g, nil
}

// nodeGroupASGs returns the names of the Auto Scaling groups the NodeGroup
// r reports in status.atProvider.resources, in the order it reports them:
// none until EKS has created them.
func nodeGroupASGs(r *composed.Unstructured) ([]string, error) {
	var res nodeGroupResources
	if err := r.GetValueInto("status.atProvider.resources", &res); err != nil {
		if fieldpath.IsNotFound(err) {
			return nil, nil
		}
		return nil, errors.Wrap(err, "cannot read status.atProvider.resources")
	}
	var names []string
	for _, rs := range res {
		for _, asg := range rs.AutoscalingGroups {
			if asg.Name != "" {
				names = append(names, asg.Name)
			}
		}
	}
	return names, nil
}

// String names the group's managed resource in messages.
func (g group) String() string { return fmt.Sprintf("%s %q", g.kind, g.name) }
