package asginstances

import (
	"context"
	"regexp"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"
	"k8s.io/utils/ptr"
)

// An assumeRoleSpec is a step of provider-aws's spec.assumeRoleChain.
type assumeRoleSpec struct {
	RoleARN           *string  `json:"roleARN,omitempty"`
	ExternalID        *string  `json:"externalID,omitempty"`
	Tags              []tag    `json:"tags,omitempty"`
	TransitiveTagKeys []string `json:"transitiveTagKeys,omitempty"`
}

// A tag is a session tag of an assumed role.
type tag struct {
	Key   *string `json:"key"`
	Value *string `json:"value"`
}

// A listing is what AWS reports of a group.
type listing struct {
	// found is false when AWS knows no group of that name.
	found       bool
	desired     int32
	providerIDs []string
}

// running are the lifecycle states of the instances a pool counts: those
// launched or launching, not those leaving, gone, in standby or in a warm
// pool.
var running = []types.LifecycleState{
	types.LifecycleStatePending,
	types.LifecycleStatePendingWait,
	types.LifecycleStatePendingProceed,
	types.LifecycleStateInService,
}

// client returns an Auto Scaling client that calls AWS as a group's
// provider does. Its configuration is built by hand, not loaded: loading
// reads the environment, shared files and instance metadata, and the
// function must use no identity but the group's. The role chain's STS
// calls go to AWS's STS endpoint, not spec.endpoint's, as provider-aws
// assumes the chain before it applies spec.endpoint (GetRoleChainConfig).
func client(a *access, region string, c aws.HTTPClient) *autoscaling.Client {
	cfg := aws.Config{
		Region:      region,
		Credentials: credentials.StaticCredentialsProvider{Value: a.creds},
		HTTPClient:  c,
	}
	for _, r := range a.roles {
		p := stscreds.NewAssumeRoleProvider(sts.NewFromConfig(cfg), ptr.Deref(r.RoleARN, ""), r.options)
		cfg.Credentials = aws.NewCredentialsCache(p)
	}
	return autoscaling.NewFromConfig(cfg, func(o *autoscaling.Options) {
		if a.endpoint != "" {
			o.BaseEndpoint = aws.String(a.endpoint)
		}
	})
}

// options sets a role chain step's options as provider-aws does
// (SetAssumeRoleOptions): the session name is the SDK's default.
func (r assumeRoleSpec) options(o *stscreds.AssumeRoleOptions) {
	o.ExternalID = r.ExternalID
	for _, t := range r.Tags {
		o.Tags = append(o.Tags, ststypes.Tag{Key: t.Key, Value: t.Value})
	}
	o.TransitiveTagKeys = append(o.TransitiveTagKeys, r.TransitiveTagKeys...)
}

// describe lists the running instances of the group named name, through
// every page of AWS's answer.
func describe(ctx context.Context, c *autoscaling.Client, name string) (listing, error) {
	in := &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}}
	var l listing
	for p := autoscaling.NewDescribeAutoScalingGroupsPaginator(c, in); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			return listing{}, err
		}
		for j := range out.AutoScalingGroups {
			g := &out.AutoScalingGroups[j]
			if aws.ToString(g.AutoScalingGroupName) != name {
				continue
			}
			l.found = true
			l.desired += aws.ToInt32(g.DesiredCapacity)
			for _, i := range g.Instances {
				id, zone := aws.ToString(i.InstanceId), aws.ToString(i.AvailabilityZone)
				if id == "" || zone == "" || !slices.Contains(running, i.LifecycleState) {
					continue
				}
				l.providerIDs = append(l.providerIDs, "aws:///"+zone+"/"+id)
			}
		}
	}
	return l, nil
}

// requestID matches the request ID AWS errors carry: a message without it
// is the same on every call, so Crossplane's events of it aggregate.
var requestID = regexp.MustCompile(`RequestID: [^,\s]*, `)

// awsError is err's message without its request ID.
func awsError(err error) string { return requestID.ReplaceAllString(err.Error(), "") }
