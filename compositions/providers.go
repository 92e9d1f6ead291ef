package compositions

import (
	"fmt"
	"hash/fnv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
)

// AnnotationResourceName is where Crossplane records which resource
// template of a Composition composed a resource.
const AnnotationResourceName = "crossplane.io/composition-resource-name"

// fieldARN is where upjet reports a resource's Amazon Resource Name.
const fieldARN = "arn"

// Provide writes on a composed resource what its provider reports once the
// external resource exists and is ready: status.atProvider as provider-aws
// (upjet) and provider-kubernetes fill it for the kinds CAPXP's Compositions
// compose, and Ready and Synced True. IDs derive from the resource's
// template and name, so they are the same each time. It stands in for a
// provider where none can run (there is no AWS here): the render tests'
// observed state, and the AWS provider's part in the move test.
func Provide(o *unstructured.Unstructured) {
	p := fieldpath.Pave(o.Object)
	fp := func(f string) string { s, _ := p.GetString("spec.forProvider." + f); return s }
	region := fp("region")
	h := StableID(o.GetAnnotations()[AnnotationResourceName] + "/" + o.GetName())
	at := map[string]any{"id": h[:8]}
	arn := func(svc, res string) string {
		return fmt.Sprintf("arn:aws:%s:%s:123456789012:%s", svc, region, res)
	}
	switch o.GetKind() {
	case "VPC":
		at = map[string]any{"id": "vpc-" + h, "cidrBlock": fp("cidrBlock"), fieldARN: arn("ec2", "vpc/vpc-"+h)}
	case "Subnet":
		at = map[string]any{"id": "subnet-" + h, "cidrBlock": fp("cidrBlock"), "availabilityZone": fp("availabilityZone"), fieldARN: arn("ec2", "subnet/subnet-"+h)}
	case "InternetGateway":
		at = map[string]any{"id": "igw-" + h}
	case "EIP":
		at = map[string]any{"id": "eipalloc-" + h, "allocationId": "eipalloc-" + h, "publicIp": "203.0.113.7"}
	case "NATGateway":
		at = map[string]any{"id": "nat-" + h}
	case "RouteTable":
		at = map[string]any{"id": "rtb-" + h}
	case "RouteTableAssociation":
		at = map[string]any{"id": "rtbassoc-" + h}
	case "SecurityGroup":
		at = map[string]any{"id": "sg-" + h, fieldARN: arn("ec2", "security-group/sg-"+h)}
	case "SecurityGroupRule":
		at = map[string]any{"id": "sgrule-" + h}
	case "LB":
		a := arn("elasticloadbalancing", "loadbalancer/net/capxp-"+h[:8]+"/"+h)
		at = map[string]any{"id": a, fieldARN: a, "dnsName": fmt.Sprintf("capxp-%s-%s.elb.%s.amazonaws.com", h[:8], h[8:], region)}
	case "LBTargetGroup":
		a := arn("elasticloadbalancing", "targetgroup/capxp-"+h[:8]+"/"+h)
		at = map[string]any{"id": a, fieldARN: a}
	case "LBListener":
		a := arn("elasticloadbalancing", "listener/net/capxp/"+h)
		port, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "forProvider", "port")
		at = map[string]any{"id": a, fieldARN: a, "port": port, "protocol": fp("protocol")}
	case "Secret":
		a := arn("secretsmanager", "secret:"+fp("name")+"-"+h[:6])
		at = map[string]any{"id": a, fieldARN: a}
	case "SecretVersion":
		at = map[string]any{"id": "version-" + h, "versionId": "version-" + h}
	case "Instance":
		ip := fmt.Sprintf("10.20.%d.%d", 64+int(h[0])%64, 10+int(h[1])%200)
		at = map[string]any{
			"id": "i-" + h[:17], "availabilityZone": fp("availabilityZone"), "privateIp": ip,
			"privateDns": "ip-" + strings.ReplaceAll(ip, ".", "-") + "." + region + ".compute.internal",
			fieldARN:     arn("ec2", "instance/i-"+h[:17]),
		}
	case "Role":
		a := fmt.Sprintf("arn:aws:iam::123456789012:role/%s", o.GetName())
		at = map[string]any{"id": o.GetName(), fieldARN: a, "uniqueId": "AROA" + strings.ToUpper(h[:16])}
	case "Cluster":
		// An EKS cluster: it reports its minor version, the endpoint of
		// its API server, on 443.
		at = map[string]any{
			"id": o.GetName(), "status": "ACTIVE", "version": fp("version"), "platformVersion": "eks.1",
			"endpoint": fmt.Sprintf("https://%s.gr7.%s.eks.amazonaws.com", strings.ToUpper(h[:16]), region),
			fieldARN:   arn("eks", "cluster/"+o.GetName()),
		}
	case "NodeGroup":
		// An EKS managed node group: the Auto Scaling group EKS made for it.
		at = map[string]any{
			"id": fp("clusterName") + ":" + o.GetName(), "status": "ACTIVE", fieldARN: arn("eks", "nodegroup/"+o.GetName()),
			"resources": []any{map[string]any{"autoscalingGroups": []any{map[string]any{"name": "eks-" + o.GetName() + "-" + h[:8]}}}},
		}
	case "Addon":
		at = map[string]any{"id": o.GetName() + ":" + fp("addonName"), fieldARN: arn("eks", "addon/"+o.GetName()+"/"+fp("addonName")+"/"+h[:8])}
	case "Object":
		m, _, _ := unstructured.NestedMap(o.Object, "spec", "forProvider", "manifest")
		obs := &unstructured.Unstructured{Object: m}
		obs.SetUID(types.UID("00000000-0000-0000-0000-" + h[:12]))
		obs.SetResourceVersion("42")
		if obs.GetKind() == "EndpointSlice" {
			obs.Object["addressType"] = "IPv4"
			obs.Object["endpoints"] = []any{map[string]any{"addresses": []any{"127.0.0.1"}, "conditions": map[string]any{"ready": true}}}
			obs.Object["ports"] = []any{map[string]any{"name": "https", "port": int64(36443), "protocol": "TCP"}}
		}
		if obs.GetKind() == "ConfigMap" && obs.GetNamespace() == LocalControlPlaneNamespace && obs.GetName() == LocalControlPlaneRecord {
			obs.Object["data"] = map[string]any{LocalControlPlaneVersionKey: "v1.36.5"}
		}
		// The plane's auto scaling group reports three instances.
		if pool, ok := strings.CutSuffix(obs.GetName(), LocalMachinePoolInstancesSuffix); ok && obs.GetKind() == "ConfigMap" && obs.GetNamespace() == LocalMachinePoolNamespace {
			ns, name, _ := strings.Cut(pool, ".")
			ids := fmt.Sprintf(`["capxp-local:///%[1]s/%[2]s-%[3]s","capxp-local:///%[1]s/%[2]s-%[4]s","capxp-local:///%[1]s/%[2]s-%[5]s"]`, ns, name, h[:5], h[5:10], h[10:15])
			obs.Object["data"] = map[string]any{LocalMachinePoolKeyProviderIDs: ids}
		}
		at = map[string]any{"manifest": obs.Object}
	}
	_ = p.SetValue("status.atProvider", at)
	_ = p.SetValue("status.conditions", []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2026-11-21T00:00:00Z"},
		map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "lastTransitionTime": "2026-11-21T00:00:00Z"},
	})
}

// StableID is a 17-hex-digit ID derived from s, the same for the same s.
func StableID(s string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%017x", h.Sum64())[:17]
}
