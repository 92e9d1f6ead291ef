package asginstances

import (
	"net/url"
	"slices"

	"k8s.io/utils/ptr"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

const (
	// The endpoint URL types of provider-aws's spec.endpoint.url.type.
	endpointStatic  = "Static"
	endpointDynamic = "Dynamic"
	endpointAuto    = "Auto"

	// serviceAutoScaling is Auto Scaling's name in spec.endpoint.services
	// (the Terraform provider's) and the name its requests are signed with.
	serviceAutoScaling = "autoscaling"

	// signingV4 is the one signing method of Auto Scaling.
	signingV4 = "v4"
)

// endpointSpec is the part of provider-aws's spec.endpoint the function
// reads. HostnameImmutable and Source are left out: they only say whether
// an AWS SDK client may change an endpoint's host name, and the Auto
// Scaling client never does.
type endpointSpec struct {
	URL struct {
		Type   string  `json:"type"`
		Static *string `json:"static,omitempty"`
	} `json:"url"`
	Services      []string `json:"services,omitempty"`
	PartitionID   *string  `json:"partitionId,omitempty"`
	SigningName   *string  `json:"signingName,omitempty"`
	SigningRegion *string  `json:"signingRegion,omitempty"`
	SigningMethod *string  `json:"signingMethod,omitempty"`
}

// autoScalingEndpoint returns the URL of the Auto Scaling endpoint e sets
// for a group in region: empty for AWS's own. It mirrors provider-aws:
// a Static URL serves the services spec.endpoint.services lists (the
// Terraform client that manages the group) or, when it lists none, every
// service (provider-aws's AWS SDK clients); Auto is AWS's own endpoints
// and needs a partition. It refuses what it cannot mirror: Dynamic, which
// the Terraform client ignores and the SDK clients turn into a host name
// Auto Scaling does not have, and signing other than Auto Scaling's.
func autoScalingEndpoint(e *endpointSpec, region string) (string, error) {
	if e == nil {
		return "", nil
	}
	switch e.URL.Type {
	case endpointStatic:
	case endpointAuto:
		if ptr.Deref(e.PartitionID, "") == "" {
			return "", errors.Errorf("spec.endpoint.url.type is %s but spec.endpoint.partitionId is not set", endpointAuto)
		}
		return "", nil
	case endpointDynamic:
		return "", errors.Errorf("spec.endpoint.url.type %s is not supported: provider-aws's Terraform client, which manages AutoscalingGroups and NodeGroups, ignores it; "+
			"function-asg-instances honours %s and %s only", endpointDynamic, endpointStatic, endpointAuto)
	default:
		return "", errors.Errorf("spec.endpoint.url.type %q is not supported: function-asg-instances honours %s and %s only", e.URL.Type, endpointStatic, endpointAuto)
	}
	static := ptr.Deref(e.URL.Static, "")
	if u, err := url.Parse(static); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.Errorf("spec.endpoint.url.static %q is not an http or https URL", static)
	}
	if len(e.Services) > 0 && !slices.Contains(e.Services, serviceAutoScaling) {
		return "", nil
	}
	if err := checkSigning(e, region); err != nil {
		return "", errors.Wrap(err, "spec.endpoint")
	}
	return static, nil
}

// checkSigning refuses signing fields that would sign Auto Scaling's
// requests other than as Auto Scaling in the group's region.
func checkSigning(e *endpointSpec, region string) error {
	if n := ptr.Deref(e.SigningName, ""); n != "" && n != serviceAutoScaling {
		return errors.Errorf("signingName %q is not supported: function-asg-instances signs as %q", n, serviceAutoScaling)
	}
	if r := ptr.Deref(e.SigningRegion, ""); r != "" && r != region {
		return errors.Errorf("signingRegion %q is not supported: function-asg-instances signs for the group's region %q", r, region)
	}
	if m := ptr.Deref(e.SigningMethod, ""); m != "" && m != signingV4 {
		return errors.Errorf("signingMethod %q is not supported: function-asg-instances signs with %s", m, signingV4)
	}
	return nil
}
