package aws

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// awsAPI calls the AWS API, as the AWS CLI would, at the emulator's
// endpoint: the Query protocol of EC2 and ELBv2 and the JSON protocol of
// Secrets Manager. moto checks no signature; the Authorization header names
// the region, which moto reads from it.
type awsAPI struct {
	endpoint, region string
}

func (a awsAPI) authorization(service string) string {
	return fmt.Sprintf("AWS4-HMAC-SHA256 Credential=testing/%s/%s/%s/aws4_request, SignedHeaders=host, Signature=0",
		time.Now().UTC().Format("20060102"), a.region, service)
}

// query calls a Query-protocol action and returns its XML answer.
func (a awsAPI) query(ctx context.Context, service, version, action string, params url.Values) ([]byte, error) {
	form := url.Values{"Action": {action}, "Version": {version}}
	for k, v := range params {
		form[k] = v
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.endpoint+"/", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	req.Header.Set("Authorization", a.authorization(service))
	return do(req, service+" "+action)
}

// jsonCall calls a JSON-protocol action.
func (a awsAPI) jsonCall(ctx context.Context, service, target string, body any) ([]byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.endpoint+"/", bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", target)
	req.Header.Set("Authorization", a.authorization(service))
	return do(req, target)
}

func do(req *http.Request, what string) ([]byte, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", what, resp.Status, b)
	}
	return b, nil
}

// ec2Filters are EC2 Describe filters, by name.
func ec2Filters(f map[string][]string) url.Values {
	v := url.Values{}
	i := 1
	for name, values := range f {
		v.Set(fmt.Sprintf("Filter.%d.Name", i), name)
		for j, val := range values {
			v.Set(fmt.Sprintf("Filter.%d.Value.%d", i, j+1), val)
		}
		i++
	}
	return v
}

// instance is an EC2 instance as DescribeInstances reports it.
type instance struct {
	ID    string `xml:"instanceId"`
	Type  string `xml:"instanceType"`
	State string `xml:"instanceState>name"`
	Zone  string `xml:"placement>availabilityZone"`
}

// instances lists the instances in the states given.
func (a awsAPI) instances(ctx context.Context, states ...string) ([]instance, error) {
	b, err := a.query(ctx, "ec2", "2016-11-15", "DescribeInstances", ec2Filters(map[string][]string{"instance-state-name": states}))
	if err != nil {
		return nil, err
	}
	var out struct {
		Reservations []struct {
			Instances []instance `xml:"instancesSet>item"`
		} `xml:"reservationSet>item"`
	}
	if err := xml.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	var all []instance
	for _, r := range out.Reservations {
		all = append(all, r.Instances...)
	}
	return all, nil
}

// secretPolicy is the resource policy of a Secrets Manager secret, by name.
func (a awsAPI) secretPolicy(ctx context.Context, name string) (string, error) {
	b, err := a.jsonCall(ctx, "secretsmanager", "secretsmanager.GetResourcePolicy", map[string]any{"SecretId": name})
	if err != nil {
		return "", err
	}
	var out struct{ ResourcePolicy string }
	if err := json.Unmarshal(b, &out); err != nil {
		return "", err
	}
	return out.ResourcePolicy, nil
}

// image is an AMI of the emulator's catalog (moto's copy of AWS's public
// Amazon Linux images): the instance resource looks its AMI up.
func (a awsAPI) image(ctx context.Context) (string, error) {
	b, err := a.query(ctx, "ec2", "2016-11-15", "DescribeImages", url.Values{"Owner.1": {"amazon"},
		"Filter.1.Name": {"name"}, "Filter.1.Value.1": {"amzn2-ami-*"}})
	if err != nil {
		return "", err
	}
	var out struct {
		Images []struct {
			ID string `xml:"imageId"`
		} `xml:"imagesSet>item"`
	}
	if err := xml.Unmarshal(b, &out); err != nil {
		return "", err
	}
	if len(out.Images) == 0 {
		return "", fmt.Errorf("the emulator has no Amazon Linux 2 image: %s", b)
	}
	return out.Images[0].ID, nil
}

// instanceProfile creates an IAM instance profile, as a platform team
// creates the one the aws machine Composition names before its first
// cluster.
func (a awsAPI) instanceProfile(ctx context.Context, profile string) error {
	_, err := a.query(ctx, "iam", "2010-05-08", "CreateInstanceProfile", url.Values{"InstanceProfileName": {profile}})
	return err
}

// loadBalancer is an ELBv2 load balancer.
type loadBalancer struct {
	ARN     string `xml:"LoadBalancerArn"`
	DNSName string `xml:"DNSName"`
}

func (a awsAPI) loadBalancers(ctx context.Context) ([]loadBalancer, error) {
	b, err := a.query(ctx, "elasticloadbalancing", "2015-12-01", "DescribeLoadBalancers", nil)
	if err != nil {
		return nil, err
	}
	var out struct {
		LBs []loadBalancer `xml:"DescribeLoadBalancersResult>LoadBalancers>member"`
	}
	return out.LBs, xml.Unmarshal(b, &out)
}

// count is how many of what the aws Compositions compose the emulator
// holds, counted with the AWS API's describe calls: everything not
// AWS's own (moto's default VPC and what comes with it) and not gone
// (terminated instances, deleted NAT gateways).
func (a awsAPI) count(ctx context.Context) (map[string]int, error) {
	n := map[string]int{}
	ec2 := func(kind, action, set string, f map[string][]string) error {
		b, err := a.query(ctx, "ec2", "2016-11-15", action, ec2Filters(f))
		if err != nil {
			return err
		}
		n[kind], err = countItems(b, set)
		return err
	}
	// What the providers compose carries their crossplane-* tags; AWS's
	// own defaults do not.
	ours := map[string][]string{"tag-key": {"crossplane-name"}}
	for _, c := range []struct{ kind, action, set string }{
		{"VPC", "DescribeVpcs", "vpcSet"},
		{"Subnet", "DescribeSubnets", "subnetSet"},
		{"InternetGateway", "DescribeInternetGateways", "internetGatewaySet"},
		{"RouteTable", "DescribeRouteTables", "routeTableSet"},
		{"SecurityGroup", "DescribeSecurityGroups", "securityGroupInfo"},
		{"EIP", "DescribeAddresses", "addressesSet"},
	} {
		if err := ec2(c.kind, c.action, c.set, ours); err != nil {
			return nil, err
		}
	}
	if err := ec2("NATGateway", "DescribeNatGateways", "natGatewaySet", map[string][]string{"state": {"pending", "available", "deleting"}}); err != nil {
		return nil, err
	}
	is, err := a.instances(ctx, "pending", "running", "stopping", "stopped", "shutting-down")
	if err != nil {
		return nil, err
	}
	n["Instance"] = len(is)
	lbs, err := a.loadBalancers(ctx)
	if err != nil {
		return nil, err
	}
	n["LoadBalancer"] = len(lbs)
	b, err := a.query(ctx, "elasticloadbalancing", "2015-12-01", "DescribeTargetGroups", nil)
	if err != nil {
		return nil, err
	}
	n["TargetGroup"] = strings.Count(string(b), "<TargetGroupArn>")
	for _, lb := range lbs {
		b, err := a.query(ctx, "elasticloadbalancing", "2015-12-01", "DescribeListeners", url.Values{"LoadBalancerArn": {lb.ARN}})
		if err != nil {
			return nil, err
		}
		n["Listener"] += strings.Count(string(b), "<ListenerArn>")
	}
	if n["SecurityGroupRule"], err = a.securityGroupRules(ctx, ours); err != nil {
		return nil, err
	}
	b, err = a.jsonCall(ctx, "secretsmanager", "secretsmanager.ListSecrets", map[string]any{})
	if err != nil {
		return nil, err
	}
	var secrets struct{ SecretList []json.RawMessage }
	if err := json.Unmarshal(b, &secrets); err != nil {
		return nil, err
	}
	n["Secret"] = len(secrets.SecretList)
	groups, err := a.autoScalingGroups(ctx)
	if err != nil {
		return nil, err
	}
	n["AutoScalingGroup"] = len(groups)
	if err := ec2("LaunchTemplate", "DescribeLaunchTemplates", "launchTemplates", nil); err != nil {
		return nil, err
	}
	return n, nil
}

// autoScalingGroup is an auto scaling group and its instances.
type autoScalingGroup struct {
	Name      string `xml:"AutoScalingGroupName"`
	Desired   int    `xml:"DesiredCapacity"`
	Instances []struct {
		ID    string `xml:"InstanceId"`
		Zone  string `xml:"AvailabilityZone"`
		State string `xml:"LifecycleState"`
	} `xml:"Instances>member"`
}

func (a awsAPI) autoScalingGroups(ctx context.Context) ([]autoScalingGroup, error) {
	b, err := a.query(ctx, "autoscaling", "2011-01-01", "DescribeAutoScalingGroups", nil)
	if err != nil {
		return nil, err
	}
	var out struct {
		Groups []autoScalingGroup `xml:"DescribeAutoScalingGroupsResult>AutoScalingGroups>member"`
	}
	return out.Groups, xml.Unmarshal(b, &out)
}

// securityGroupRules counts the rules of the security groups the filter
// selects: not those of the groups AWS makes with each VPC.
func (a awsAPI) securityGroupRules(ctx context.Context, groups map[string][]string) (int, error) {
	b, err := a.query(ctx, "ec2", "2016-11-15", "DescribeSecurityGroups", ec2Filters(groups))
	if err != nil {
		return 0, err
	}
	var out struct {
		IDs []string `xml:"securityGroupInfo>item>groupId"`
	}
	if err := xml.Unmarshal(b, &out); err != nil || len(out.IDs) == 0 {
		return 0, err
	}
	if b, err = a.query(ctx, "ec2", "2016-11-15", "DescribeSecurityGroupRules", ec2Filters(map[string][]string{"group-id": out.IDs})); err != nil {
		return 0, err
	}
	return countItems(b, "securityGroupRuleSet")
}

// targets are the instances registered in the emulator's target groups.
func (a awsAPI) targets(ctx context.Context) ([]string, error) {
	b, err := a.query(ctx, "elasticloadbalancing", "2015-12-01", "DescribeTargetGroups", nil)
	if err != nil {
		return nil, err
	}
	var groups struct {
		ARNs []string `xml:"DescribeTargetGroupsResult>TargetGroups>member>TargetGroupArn"`
	}
	if err := xml.Unmarshal(b, &groups); err != nil {
		return nil, err
	}
	var ids []string
	for _, arn := range groups.ARNs {
		b, err := a.query(ctx, "elasticloadbalancing", "2015-12-01", "DescribeTargetHealth", url.Values{"TargetGroupArn": {arn}})
		if err != nil {
			return nil, err
		}
		var health struct {
			IDs []string `xml:"DescribeTargetHealthResult>TargetHealthDescriptions>member>Target>Id"`
		}
		if err := xml.Unmarshal(b, &health); err != nil {
			return nil, err
		}
		ids = append(ids, health.IDs...)
	}
	sort.Strings(ids)
	return ids, nil
}

// countItems counts the items of an EC2 answer's top-level set.
func countItems(b []byte, set string) (int, error) {
	d := xml.NewDecoder(bytes.NewReader(b))
	var path []string
	n := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Local == "item" && len(path) == 2 && path[1] == set {
				n++
			}
			path = append(path, t.Name.Local)
		case xml.EndElement:
			path = path[:len(path)-1]
		}
	}
}

// inventory is every resource of the account the aws Compositions compose,
// by kind and ID (and state, where a deleted resource stays visible for a
// while): a resource deleted and created again has a new ID, so two equal
// inventories mean nothing was created or deleted in between.
func (a awsAPI) inventory(ctx context.Context) ([]string, error) {
	var out []string
	ours := map[string][]string{"tag-key": {"crossplane-name"}}
	for _, c := range []struct{ kind, action, set, id string }{
		{"VPC", "DescribeVpcs", "vpcSet", "vpcId"},
		{"Subnet", "DescribeSubnets", "subnetSet", "subnetId"},
		{"InternetGateway", "DescribeInternetGateways", "internetGatewaySet", "internetGatewayId"},
		{"RouteTable", "DescribeRouteTables", "routeTableSet", "routeTableId"},
		{"SecurityGroup", "DescribeSecurityGroups", "securityGroupInfo", "groupId"},
		{"EIP", "DescribeAddresses", "addressesSet", "allocationId"},
		{"NATGateway", "DescribeNatGateways", "natGatewaySet", "natGatewayId"},
	} {
		f := ours
		if c.kind == "NATGateway" {
			f = nil
		}
		b, err := a.query(ctx, "ec2", "2016-11-15", c.action, ec2Filters(f))
		if err != nil {
			return nil, err
		}
		ids, err := itemValues(b, c.set, c.id)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			out = append(out, c.kind+" "+id)
		}
	}
	is, err := a.instances(ctx, "pending", "running", "stopping", "stopped", "shutting-down", "terminated")
	if err != nil {
		return nil, err
	}
	for _, i := range is {
		out = append(out, "Instance "+i.ID+" "+i.State)
	}
	targets, err := a.targets(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range targets {
		out = append(out, "Target "+t)
	}
	for _, q := range []struct{ kind, action, element string }{
		{"LoadBalancer", "DescribeLoadBalancers", "LoadBalancerArn"},
		{"TargetGroup", "DescribeTargetGroups", "TargetGroupArn"},
	} {
		b, err := a.query(ctx, "elasticloadbalancing", "2015-12-01", q.action, nil)
		if err != nil {
			return nil, err
		}
		for _, arn := range elementValues(b, q.element) {
			out = append(out, q.kind+" "+arn)
		}
	}
	b, err := a.jsonCall(ctx, "secretsmanager", "secretsmanager.ListSecrets", map[string]any{})
	if err != nil {
		return nil, err
	}
	var secrets struct{ SecretList []struct{ ARN string } }
	if err := json.Unmarshal(b, &secrets); err != nil {
		return nil, err
	}
	for _, s := range secrets.SecretList {
		out = append(out, "Secret "+s.ARN)
	}
	sort.Strings(out)
	return out, nil
}

// itemValues are the values of an element of each item of an EC2 answer's
// top-level set.
func itemValues(b []byte, set, element string) ([]string, error) {
	d := xml.NewDecoder(bytes.NewReader(b))
	var path, values []string
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return values, nil
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			path = append(path, t.Name.Local)
		case xml.EndElement:
			path = path[:len(path)-1]
		case xml.CharData:
			if len(path) == 4 && path[1] == set && path[2] == "item" && path[3] == element {
				values = append(values, string(t))
			}
		}
	}
}

// elementValues are the values of every element of a name in an answer.
func elementValues(b []byte, element string) []string {
	var values []string
	d := xml.NewDecoder(bytes.NewReader(b))
	var in bool
	for {
		tok, err := d.Token()
		if err != nil {
			return values
		}
		switch t := tok.(type) {
		case xml.StartElement:
			in = t.Name.Local == element
		case xml.EndElement:
			in = false
		case xml.CharData:
			if in {
				values = append(values, string(t))
			}
		}
	}
}
