package credentials

// The cloud networks a namespace owns: what puts a machine into a network is
// admitted only with IDs its namespace's own managed resources report.

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
)

// NetworkKind is a managed resource kind whose status reports IDs of a
// network it is (a VPC, a subnet, a security group).
type NetworkKind struct {
	schema.GroupKind
	// IDFields are the status fields holding the IDs, as dotted paths.
	IDFields []string
}

// NetworkUse is a managed resource kind that puts machines into networks,
// and the spec.forProvider fields naming them.
type NetworkUse struct {
	schema.GroupKind
	// Resource is the kind's plural resource name.
	Resource string
	// Fields are the spec.forProvider fields holding network IDs: a string
	// or a list of strings, a dotted path into nested objects.
	Fields []string
}

const ec2Group = "ec2.aws.m.upbound.io"

// AWSNetworkKinds are provider-upjet-aws's network kinds. A VPC also owns its
// default security group: AWS puts an instance named without security
// groups there, and the provider writes it back into the instance's spec.
var AWSNetworkKinds = []NetworkKind{
	{GroupKind: schema.GroupKind{Group: ec2Group, Kind: "VPC"}, IDFields: []string{"status.atProvider.id", "status.atProvider.defaultSecurityGroupId"}},
	{GroupKind: schema.GroupKind{Group: ec2Group, Kind: "Subnet"}, IDFields: []string{"status.atProvider.id"}},
	{GroupKind: schema.GroupKind{Group: ec2Group, Kind: "SecurityGroup"}, IDFields: []string{"status.atProvider.id"}},
}

// AWSNetworkUses are the provider-upjet-aws kinds the shipped Compositions
// put machines into networks with, and the fields they set from an XR's
// spec.network.
var AWSNetworkUses = []NetworkUse{
	{GroupKind: schema.GroupKind{Group: ec2Group, Kind: "Instance"}, Resource: "instances", Fields: []string{"subnetId", "vpcSecurityGroupIds"}},
	{GroupKind: schema.GroupKind{Group: ec2Group, Kind: "LaunchTemplate"}, Resource: "launchtemplates", Fields: []string{"vpcSecurityGroupIds", "securityGroupIds"}},
	{GroupKind: schema.GroupKind{Group: "autoscaling.aws.m.upbound.io", Kind: "AutoscalingGroup"}, Resource: "autoscalinggroups", Fields: []string{"vpcZoneIdentifier"}},
	{GroupKind: schema.GroupKind{Group: "eks.aws.m.upbound.io", Kind: "Cluster"}, Resource: "clusters", Fields: []string{"vpcConfig.subnetIds", "vpcConfig.securityGroupIds"}},
	{GroupKind: schema.GroupKind{Group: "eks.aws.m.upbound.io", Kind: "NodeGroup"}, Resource: "nodegroups", Fields: []string{"subnetIds"}},
}

// Networks adds to owned the IDs the objects of kind k report, each with
// the kind and name of the object reporting it. An object being deleted
// still owns its IDs: what runs in them is deleted before them.
func Networks(k NetworkKind, objs []unstructured.Unstructured, owned map[string]string) {
	for i := range objs {
		p := fieldpath.Pave(objs[i].Object)
		for _, f := range k.IDFields {
			if id, err := p.GetString(f); err == nil && id != "" {
				owned[id] = fmt.Sprintf("%s %s", k.Kind, objs[i].GetName())
			}
		}
	}
}
