package compcheck

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/capxp/cluster-api-provider-crossplane/compositions"
)

// The AWS credentials kinds' group, the kind an auto scaling group is, and
// the kind an EKS managed node group (an auto scaling group EKS makes) is.
const (
	awsCredentialsGroup  = "aws.m.upbound.io"
	kindAutoScalingGroup = "AutoscalingGroup"
	groupAutoScaling     = "autoscaling.aws.m.upbound.io"
	kindNodeGroup        = "NodeGroup"
	groupEKS             = "eks.aws.m.upbound.io"
)

// autoScaling stands in for the AWS Auto Scaling API, as provider-upjet-aws
// stands in for the composed resources: each auto scaling group the
// Composition composed (directly, or behind an EKS managed node group) runs
// its desired capacity of instances, spread over the XR's failure domains.
// function-asg-instances lists them through it, with the credentials of a
// ProviderConfig the check gives (extra).
type autoScaling struct {
	srv *httptest.Server
	mu  sync.Mutex
	// groups are the composed groups' instances, by group name.
	groups map[string][]asgInstance
}

type asgInstance struct {
	ID    string `xml:"InstanceId"`
	Zone  string `xml:"AvailabilityZone"`
	State string `xml:"LifecycleState"`
}

func newAutoScaling() *autoScaling {
	a := &autoScaling{groups: map[string][]asgInstance{}}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	return a
}

func (a *autoScaling) close() { a.srv.Close() }

// observe runs the composed groups' instances.
func (a *autoScaling) observe(xr *unstructured.Unstructured, composed []*unstructured.Unstructured) {
	zones, _, _ := unstructured.NestedStringSlice(xr.Object, "spec", "failureDomains")
	if len(zones) == 0 {
		region, _, _ := unstructured.NestedString(xr.Object, "spec", "network", "region")
		zones = []string{region + "a"}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range composed {
		var name string
		var desired any
		switch gk := c.GroupVersionKind().GroupKind(); {
		case gk.Group == groupAutoScaling && gk.Kind == kindAutoScalingGroup:
			name, _, _ = unstructured.NestedString(c.Object, "status", "atProvider", "id")
			desired, _, _ = unstructured.NestedFieldNoCopy(c.Object, "spec", "forProvider", "desiredCapacity")
		case gk.Group == groupEKS && gk.Kind == kindNodeGroup:
			rs, _, _ := unstructured.NestedSlice(c.Object, "status", "atProvider", "resources")
			if len(rs) > 0 {
				gs, _, _ := unstructured.NestedSlice(rs[0].(map[string]any), "autoscalingGroups")
				if len(gs) > 0 {
					name, _, _ = unstructured.NestedString(gs[0].(map[string]any), "name")
				}
			}
			desired, _, _ = unstructured.NestedFieldNoCopy(c.Object, "spec", "forProvider", "scalingConfig", "desiredSize")
		default:
			continue
		}
		n, _ := desired.(int64)
		if f, ok := desired.(float64); ok {
			n = int64(f)
		}
		var in []asgInstance
		for i := range n {
			in = append(in, asgInstance{
				ID:    "i-" + compositions.StableID(fmt.Sprintf("%s/%d", name, i)),
				Zone:  zones[int(i)%len(zones)],
				State: "InService",
			})
		}
		a.groups[name] = in
	}
}

// serve answers DescribeAutoScalingGroups (the Query protocol) for the
// groups named.
func (a *autoScaling) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "DescribeAutoScalingGroups" {
		http.Error(w, "<ErrorResponse><Error><Code>InvalidAction</Code><Message>the check serves DescribeAutoScalingGroups only</Message></Error></ErrorResponse>", http.StatusBadRequest)
		return
	}
	type group struct {
		Name      string        `xml:"AutoScalingGroupName"`
		Desired   int           `xml:"DesiredCapacity"`
		Instances []asgInstance `xml:"Instances>member"`
	}
	var out struct {
		XMLName xml.Name `xml:"DescribeAutoScalingGroupsResponse"`
		Groups  []group  `xml:"DescribeAutoScalingGroupsResult>AutoScalingGroups>member"`
	}
	a.mu.Lock()
	for i := 1; ; i++ {
		name := r.Form.Get(fmt.Sprintf("AutoScalingGroupNames.member.%d", i))
		if name == "" {
			break
		}
		if in, ok := a.groups[name]; ok {
			out.Groups = append(out.Groups, group{Name: name, Desired: len(in), Instances: in})
		}
	}
	a.mu.Unlock()
	w.Header().Set("Content-Type", "text/xml")
	_ = xml.NewEncoder(w).Encode(out)
}

// credentials are the ProviderConfig an XR's aws.m.upbound.io
// providerConfigRef names, pointed at the stand-in, and its Secret; none
// for other credentials.
func (a *autoScaling) credentials(xr *unstructured.Unstructured) []*unstructured.Unstructured {
	ref, _, _ := unstructured.NestedStringMap(xr.Object, "spec", "providerConfigRef")
	if ref["apiGroup"] != awsCredentialsGroup || ref["name"] == "" {
		return nil
	}
	meta := map[string]any{"name": ref["name"]}
	secretNS := xr.GetNamespace()
	if ref["kind"] != "ClusterProviderConfig" {
		meta["namespace"] = xr.GetNamespace()
	}
	secret := ref["name"] + "-check-credentials"
	pc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": awsCredentialsGroup + "/v1beta1", "kind": ref["kind"], "metadata": meta,
		"spec": map[string]any{
			"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"namespace": secretNS, "name": secret, "key": "credentials"}},
			"endpoint":    map[string]any{"url": map[string]any{"type": "Static", "static": a.srv.URL}},
		},
	}}
	creds := "[default]\naws_access_key_id = AKIACAPXPCHECK\naws_secret_access_key = capxp-check\n"
	s := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": secret, "namespace": secretNS},
		"data":     map[string]any{"credentials": base64.StdEncoding.EncodeToString([]byte(creds))},
	}}
	return []*unstructured.Unstructured{pc, s}
}
