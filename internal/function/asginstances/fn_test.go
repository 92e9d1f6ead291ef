package asginstances

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/utils/ptr"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

const (
	// secretCredentials is the content of the tenant's credentials Secret.
	secretCredentials = "[default]\naws_access_key_id = AKIDFROMSECRET\naws_secret_access_key = s3cr3t\n"
	// oldID is a provider ID the observed XR already lists.
	oldID = "aws:///eu-west-1a/i-old"
)

// setAmbient gives the test every ambient AWS identity and endpoint the
// AWS SDK's default configuration would use: the function must use none.
func setAmbient(t *testing.T, endpoint string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "credentials")
	ini := "[default]\naws_access_key_id = AKIDFROMFILE\naws_secret_access_key = x\n[profile ambient]\naws_access_key_id = AKIDFROMPROFILE\naws_secret_access_key = x\n"
	if err := os.WriteFile(file, []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIDFROMENV", "AWS_SECRET_ACCESS_KEY": "env-secret", "AWS_SESSION_TOKEN": "env-token",
		"AWS_PROFILE": "ambient", "AWS_SHARED_CREDENTIALS_FILE": file, "AWS_CONFIG_FILE": file,
		"AWS_REGION": "us-west-2", "AWS_DEFAULT_REGION": "us-west-2",
		"AWS_ENDPOINT_URL": endpoint, "AWS_ENDPOINT_URL_AUTO_SCALING": endpoint, "AWS_ENDPOINT_URL_STS": endpoint,
		"AWS_EC2_METADATA_SERVICE_ENDPOINT": endpoint,
	} {
		t.Setenv(k, v)
	}
}

// selector is a requirement by name.
func selector(apiVersion, kind, namespace, name string) *fnv1.ResourceSelector {
	s := &fnv1.ResourceSelector{ApiVersion: apiVersion, Kind: kind, Match: &fnv1.ResourceSelector_MatchName{MatchName: name}}
	if namespace != "" {
		s.Namespace = ptr.To(namespace)
	}
	return s
}

// A result is a result's severity and message.
type result struct {
	Severity fnv1.Severity
	Message  string
}

func resultsOf(rsp *fnv1.RunFunctionResponse) []result {
	var out []result
	for _, r := range rsp.GetResults() {
		out = append(out, result{Severity: r.GetSeverity(), Message: r.GetMessage()})
	}
	return out
}

// outputOf returns the desired XR's status.outputs.providerIDList: nil when
// the response sets none.
func outputOf(rsp *fnv1.RunFunctionResponse) []string {
	outputs := rsp.GetDesired().GetComposite().GetResource().GetFields()["status"].GetStructValue().GetFields()["outputs"]
	v := outputs.GetStructValue().GetFields()["providerIDList"]
	if v == nil {
		return nil
	}
	out := []string{}
	for _, e := range v.GetListValue().GetValues() {
		out = append(out, e.GetStringValue())
	}
	return out
}

func TestRunFunction(t *testing.T) {
	fake := &fakeAWS{groups: map[string]fakeGroup{
		"pool-a": {desired: 4, instances: []fakeInstance{
			{"i-a3", "eu-west-1a", "InService"},
			{"i-a1", "eu-west-1b", "Pending"},
			{"i-a2", "eu-west-1c", "Pending:Wait"},
			{"i-a4", "eu-west-1a", "Pending:Proceed"},
			{"i-x1", "eu-west-1a", "Terminating"},
			{"i-x2", "eu-west-1a", "Terminating:Wait"},
			{"i-x3", "eu-west-1a", "Terminating:Proceed"},
			{"i-x4", "eu-west-1b", "Terminated"},
			{"i-x5", "eu-west-1b", "Detaching"},
			{"i-x6", "eu-west-1b", "Detached"},
			{"i-x7", "eu-west-1c", "EnteringStandby"},
			{"i-x8", "eu-west-1c", "Standby"},
			{"i-x9", "eu-west-1c", "Warmed:Running"},
		}},
		"pool-b":       {desired: 1, instances: []fakeInstance{{"i-b1", "eu-west-1b", "InService"}, {"i-b1", "eu-west-1b", "InService"}}},
		"pool-growing": {desired: 3, instances: []fakeInstance{{"i-g1", "eu-west-1a", "InService"}}},
		"pool-paged":   {desired: 1, paged: true, instances: []fakeInstance{{"i-p1", "eu-west-1a", "InService"}}},
		"pool-denied":  {fail: "AccessDenied"},
		"pool-empty":   {},
		"eks-pool-ng-1": {desired: 2, instances: []fakeInstance{
			{"i-n1", "eu-west-1a", "InService"},
			{"i-n2", "eu-west-1b", "Pending"},
			{"i-nx", "eu-west-1b", "Terminating"},
		}},
		"eks-pool-ng-b":      {desired: 1, instances: []fakeInstance{{"i-nb1", "eu-west-1b", "InService"}}},
		"eks-pool-ng-a":      {desired: 1, instances: []fakeInstance{{"i-na1", "eu-west-1c", "InService"}}},
		"eks-pool-ng-denied": {fail: "AccessDenied"},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	ambient := &fakeAWS{}
	ambientSrv := httptest.NewServer(ambient)
	defer ambientSrv.Close()
	setAmbient(t, ambientSrv.URL)

	creds := secret(t, "team-a", map[string]string{"credentials": secretCredentials})
	pc := config(t, "ProviderConfig", "team-a", "aws", secretSpec("team-a", staticEndpoint(srv.URL)))
	supplied := map[string]*fnv1.Resources{"ProviderConfig/team-a/aws": items(pc), "Secret/team-a/aws-creds": items(creds)}
	// withConfig supplies the tenant's Secret and the ProviderConfig spec.
	withConfig := func(spec map[string]any) map[string]*fnv1.Resources {
		return map[string]*fnv1.Resources{"ProviderConfig/team-a/aws": items(config(t, "ProviderConfig", "team-a", "aws", spec)), "Secret/team-a/aws-creds": items(creds)}
	}
	pcSelector := selector("aws.m.upbound.io/v1beta1", "ProviderConfig", "team-a", "aws")
	secretSelector := selector("v1", "Secret", "team-a", "aws-creds")
	both := map[string]*fnv1.ResourceSelector{"ProviderConfig/team-a/aws": pcSelector, "Secret/team-a/aws-creds": secretSelector}
	describe := func(name string) call {
		return call{Action: "DescribeAutoScalingGroups", Name: name, KeyID: "AKIDFROMSECRET", Region: "eu-west-1"}
	}
	credentialsErr := `cannot use the credentials of AutoscalingGroup "pool-asg": `

	type args struct {
		observedIDs []string
		groups      map[string]*fnv1.Resource
		required    map[string]*fnv1.Resources
	}
	type want struct {
		requirements map[string]*fnv1.ResourceSelector
		ids          []string
		results      []result
		ttl          time.Duration
		calls        []call
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"NothingObserved": {
			reason: "With no AutoScalingGroup observed the function passes the desired state through and requires nothing.",
			args: args{observedIDs: []string{oldID}, groups: map[string]*fnv1.Resource{
				"launch-template": {Resource: st(t, map[string]any{"apiVersion": "ec2.aws.m.upbound.io/v1beta1", "kind": "LaunchTemplate", "metadata": map[string]any{"name": "lt"}})},
			}},
			want: want{ttl: SettledTTL},
		},
		"ProviderConfigNotSuppliedYet": {
			reason: "The first call requires the group's ProviderConfig, in the group's namespace, and keeps the observed list.",
			args:   args{observedIDs: []string{oldID}, groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-a"))}},
			want: want{
				requirements: map[string]*fnv1.ResourceSelector{"ProviderConfig/team-a/aws": pcSelector},
				ids:          []string{oldID},
				ttl:          ProgressTTL,
			},
		},
		"SecretNotSuppliedYet": {
			reason: "Once the ProviderConfig is supplied the function requires its Secret too, declaring the ProviderConfig again.",
			args: args{observedIDs: []string{oldID}, groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-a"))},
				required: map[string]*fnv1.Resources{"ProviderConfig/team-a/aws": items(pc)}},
			want: want{requirements: both, ids: []string{oldID}, ttl: ProgressTTL},
		},
		"GroupNotNamedYet": {
			reason: "A group the provider has not named is not listed: the observed list is kept and the function asks to be called again soon.",
			args: args{observedIDs: []string{oldID}, groups: map[string]*fnv1.Resource{
				"asg-a": observedGroup(t, "pool-asg-a", awsName("pool-a")),
				"asg-b": observedGroup(t, "pool-asg-b"),
			}, required: supplied},
			want: want{requirements: both, ids: []string{oldID}, ttl: ProgressTTL},
		},
		"ProviderConfigReadsItsOwnNamespacesSecret": {
			reason: "A namespace's ProviderConfig naming another namespace's Secret has its own namespace's Secret read, as provider-aws does.",
			args: args{groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-b"))},
				required: map[string]*fnv1.Resources{
					"ProviderConfig/team-a/aws": items(config(t, "ProviderConfig", "team-a", "aws", secretSpec("team-b", staticEndpoint(srv.URL)))),
					"Secret/team-a/aws-creds":   items(creds),
				}},
			want: want{requirements: both, ids: []string{"aws:///eu-west-1b/i-b1"}, ttl: SettledTTL, calls: []call{describe("pool-b")}},
		},
		"ClusterProviderConfigReadsSecretRefNamespace": {
			reason: "A ClusterProviderConfig's Secret is read in its secretRef's namespace.",
			args: args{groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-b"), configRefOf("ClusterProviderConfig", "shared"))},
				required: map[string]*fnv1.Resources{
					"ClusterProviderConfig/shared":       items(config(t, "ClusterProviderConfig", "", "shared", secretSpec("crossplane-system", staticEndpoint(srv.URL)))),
					"Secret/crossplane-system/aws-creds": items(secret(t, "crossplane-system", map[string]string{"credentials": "aws_access_key_id=AKIDCLUSTER\naws_secret_access_key=x"})),
				}},
			want: want{
				requirements: map[string]*fnv1.ResourceSelector{
					"ClusterProviderConfig/shared":       selector("aws.m.upbound.io/v1beta1", "ClusterProviderConfig", "", "shared"),
					"Secret/crossplane-system/aws-creds": selector("v1", "Secret", "crossplane-system", "aws-creds"),
				},
				ids:   []string{"aws:///eu-west-1b/i-b1"},
				ttl:   SettledTTL,
				calls: []call{{Action: "DescribeAutoScalingGroups", Name: "pool-b", KeyID: "AKIDCLUSTER", Region: "eu-west-1"}},
			},
		},
		"DefaultProviderConfigRef": {
			reason: "A group without spec.providerConfigRef uses provider-aws's default, ClusterProviderConfig default.",
			args: args{groups: map[string]*fnv1.Resource{"asg": {Resource: st(t, map[string]any{
				"apiVersion": "autoscaling.aws.m.upbound.io/v1beta2", "kind": "AutoscalingGroup",
				"metadata": map[string]any{"name": "pool-asg", "namespace": "team-a"},
				"spec":     map[string]any{"forProvider": map[string]any{"region": "eu-west-1"}},
			})}}},
			want: want{
				requirements: map[string]*fnv1.ResourceSelector{"ClusterProviderConfig/default": selector("aws.m.upbound.io/v1beta1", "ClusterProviderConfig", "", "default")},
				ttl:          ProgressTTL,
			},
		},
		"UnsupportedSource": {
			reason: "A ProviderConfig whose credentials are not a Secret is refused: the function has no other identity to use.",
			args: args{observedIDs: []string{oldID}, groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-a"))},
				required: map[string]*fnv1.Resources{"ProviderConfig/team-a/aws": items(config(t, "ProviderConfig", "team-a", "aws", map[string]any{"credentials": map[string]any{"source": "IRSA"}}))}},
			want: want{
				requirements: map[string]*fnv1.ResourceSelector{"ProviderConfig/team-a/aws": pcSelector},
				results: []result{{fnv1.Severity_SEVERITY_FATAL, credentialsErr +
					`ProviderConfig "aws" in namespace "team-a" uses credentials source "IRSA": function-asg-instances reads only credentials from a Secret (spec.credentials.source: Secret)`}},
				ttl: SettledTTL,
			},
		},
		"ProviderConfigNotFound": {
			reason: "A ProviderConfig Crossplane looked for and did not find is fatal.",
			args: args{groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-a"))},
				required: map[string]*fnv1.Resources{"ProviderConfig/team-a/aws": items()}},
			want: want{
				requirements: map[string]*fnv1.ResourceSelector{"ProviderConfig/team-a/aws": pcSelector},
				results:      []result{{fnv1.Severity_SEVERITY_FATAL, credentialsErr + `ProviderConfig "aws" in namespace "team-a" not found`}},
				ttl:          SettledTTL,
			},
		},
		"SecretNotFound": {
			reason: "A Secret Crossplane looked for and did not find is fatal.",
			args: args{groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-a"))},
				required: map[string]*fnv1.Resources{"ProviderConfig/team-a/aws": items(pc), "Secret/team-a/aws-creds": items()}},
			want: want{
				requirements: both,
				results: []result{{fnv1.Severity_SEVERITY_FATAL, credentialsErr +
					`Secret "aws-creds" in namespace "team-a" named by ProviderConfig "aws" in namespace "team-a" not found`}},
				ttl: SettledTTL,
			},
		},
		"SecretKeyMissing": {
			reason: "A Secret without the named key is fatal.",
			args: args{groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-a"))},
				required: map[string]*fnv1.Resources{"ProviderConfig/team-a/aws": items(pc), "Secret/team-a/aws-creds": items(secret(t, "team-a", map[string]string{"other": secretCredentials}))}},
			want: want{
				requirements: both,
				results: []result{{fnv1.Severity_SEVERITY_FATAL, credentialsErr +
					`Secret "aws-creds" in namespace "team-a" named by ProviderConfig "aws" in namespace "team-a" has no key "credentials"`}},
				ttl: SettledTTL,
			},
		},
		"CredentialsDoNotParse": {
			reason: "Credentials that are not a shared credentials file are fatal, and the message does not quote them.",
			args: args{groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-a"))},
				required: map[string]*fnv1.Resources{"ProviderConfig/team-a/aws": items(pc), "Secret/team-a/aws-creds": items(secret(t, "team-a", map[string]string{"credentials": "[default]\nAKIDFROMSECRET s3cr3t\n"}))}},
			want: want{
				requirements: both,
				results: []result{{fnv1.Severity_SEVERITY_FATAL, credentialsErr +
					`key "credentials" of Secret "aws-creds" in namespace "team-a" named by ProviderConfig "aws" in namespace "team-a" is not an AWS shared credentials file: ` +
					`line 2: the line is neither a section header, a comment nor a key and its value`}},
				ttl: SettledTTL,
			},
		},
		"DynamicEndpoint": {
			reason: "A Dynamic endpoint is refused: the function cannot know where provider-aws's Terraform client calls.",
			args: args{groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-a"))},
				required: withConfig(secretSpec("team-a", map[string]any{"endpoint": map[string]any{"url": map[string]any{
					"type": "Dynamic", "dynamic": map[string]any{"protocol": "https", "host": "example.org"},
				}}}))},
			want: want{
				requirements: both,
				results: []result{{fnv1.Severity_SEVERITY_FATAL, credentialsErr + `ProviderConfig "aws" in namespace "team-a": spec.endpoint.url.type Dynamic is not supported: ` +
					`provider-aws's Terraform client, which manages AutoscalingGroups and NodeGroups, ignores it; function-asg-instances honours Static and Auto only`}},
				ttl: SettledTTL,
			},
		},
		"ListsRunningInstancesOfEveryGroup": {
			reason: "The list is the sorted, deduplicated union of the groups' Pending and InService instances; it matches the desired capacities, so the TTL is long.",
			args: args{observedIDs: []string{oldID}, groups: map[string]*fnv1.Resource{
				"asg-b": observedGroup(t, "pool-asg-b", awsName("pool-b")),
				"asg-a": observedGroup(t, "pool-asg-a", awsName("pool-a")),
			}, required: supplied},
			want: want{
				requirements: both,
				ids:          []string{"aws:///eu-west-1a/i-a3", "aws:///eu-west-1a/i-a4", "aws:///eu-west-1b/i-a1", "aws:///eu-west-1b/i-b1", "aws:///eu-west-1c/i-a2"},
				ttl:          SettledTTL,
				calls:        []call{describe("pool-a"), describe("pool-b")},
			},
		},
		"ScaledToZero": {
			reason: "A group scaled to zero writes an empty list rather than none, so the XR says the pool has no machines.",
			args:   args{observedIDs: []string{oldID}, groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-empty"))}, required: supplied},
			want:   want{requirements: both, ids: []string{}, ttl: SettledTTL, calls: []call{describe("pool-empty")}},
		},
		"FollowsPages": {
			reason: "The function reads every page of AWS's answer.",
			args:   args{groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-paged"))}, required: supplied},
			want: want{
				requirements: both,
				ids:          []string{"aws:///eu-west-1a/i-p1"},
				ttl:          SettledTTL,
				calls:        []call{describe("pool-paged"), {Action: "DescribeAutoScalingGroups", Name: "pool-paged", NextToken: "page-2", KeyID: "AKIDFROMSECRET", Region: "eu-west-1"}},
			},
		},
		"InstancesStillLaunching": {
			reason: "While the list is shorter than the desired capacity the function asks to be called again soon.",
			args:   args{groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-growing"))}, required: supplied},
			want:   want{requirements: both, ids: []string{"aws:///eu-west-1a/i-g1"}, ttl: ProgressTTL, calls: []call{describe("pool-growing")}},
		},
		"AWSErrorKeepsObservedList": {
			reason: "An AWS error is a warning naming the group; the observed list is kept, since a list left out would be removed.",
			args:   args{observedIDs: []string{oldID}, groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-denied"))}, required: supplied},
			want: want{
				requirements: both,
				ids:          []string{oldID},
				results: []result{{fnv1.Severity_SEVERITY_WARNING, `cannot list the instances of AutoscalingGroup "pool-asg" (Auto Scaling group "pool-denied" in eu-west-1): ` +
					`operation error Auto Scaling: DescribeAutoScalingGroups, https response error StatusCode: 403, api error AccessDenied: not allowed`}},
				ttl:   ProgressTTL,
				calls: []call{describe("pool-denied")},
			},
		},
		"AWSErrorWithoutObservedList": {
			reason: "Without an observed list to keep, an AWS error writes no list.",
			args:   args{groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-denied"))}, required: supplied},
			want: want{
				requirements: both,
				results: []result{{fnv1.Severity_SEVERITY_WARNING, `cannot list the instances of AutoscalingGroup "pool-asg" (Auto Scaling group "pool-denied" in eu-west-1): ` +
					`operation error Auto Scaling: DescribeAutoScalingGroups, https response error StatusCode: 403, api error AccessDenied: not allowed`}},
				ttl:   ProgressTTL,
				calls: []call{describe("pool-denied")},
			},
		},
		"GroupUnknownToAWS": {
			reason: "A group the provider saw that AWS no longer knows is a warning; the observed list is kept.",
			args:   args{observedIDs: []string{oldID}, groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-gone"))}, required: supplied},
			want: want{
				requirements: both,
				ids:          []string{oldID},
				results:      []result{{fnv1.Severity_SEVERITY_WARNING, `AutoscalingGroup "pool-asg": AWS knows no Auto Scaling group "pool-gone" in eu-west-1: was it deleted outside Crossplane?`}},
				ttl:          ProgressTTL,
				calls:        []call{describe("pool-gone")},
			},
		},
		"GroupBeingCreated": {
			reason: "A group named only by its external-name annotation and unknown to AWS is one the provider has yet to create: no warning.",
			args:   args{observedIDs: []string{oldID}, groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", externalName("pool-new"))}, required: supplied},
			want:   want{requirements: both, ids: []string{oldID}, ttl: ProgressTTL, calls: []call{describe("pool-new")}},
		},
		"EndpointForOtherServices": {
			reason: "A Static endpoint whose services leave out autoscaling is not used for Auto Scaling: the call goes to AWS's endpoint.",
			args: args{observedIDs: []string{oldID}, groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-b"))},
				required: withConfig(secretSpec("team-a", staticEndpoint(srv.URL, "ec2", "sts")))},
			want: want{
				requirements: both,
				ids:          []string{oldID},
				results: []result{{fnv1.Severity_SEVERITY_WARNING, `cannot list the instances of AutoscalingGroup "pool-asg" (Auto Scaling group "pool-b" in eu-west-1): ` +
					`operation error Auto Scaling: DescribeAutoScalingGroups, https response error StatusCode: 403, api error NotTheTestServer: autoscaling.eu-west-1.amazonaws.com is not the test server`}},
				ttl: ProgressTTL,
			},
		},
		"EndpointForAutoScaling": {
			reason: "A Static endpoint whose services include autoscaling is used.",
			args: args{groups: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-b"))},
				required: withConfig(secretSpec("team-a", staticEndpoint(srv.URL, "ec2", "autoscaling")))},
			want: want{requirements: both, ids: []string{"aws:///eu-west-1b/i-b1"}, ttl: SettledTTL, calls: []call{describe("pool-b")}},
		},
		"NodeGroupListsInstancesOfItsGroup": {
			reason: "An EKS NodeGroup's Auto Scaling group is listed with the NodeGroup's credentials and region.",
			args:   args{observedIDs: []string{oldID}, groups: map[string]*fnv1.Resource{"workers": observedNodeGroup(t, reports("eks-pool-ng-1"))}, required: supplied},
			want: want{
				requirements: both,
				ids:          []string{"aws:///eu-west-1a/i-n1", "aws:///eu-west-1b/i-n2"},
				ttl:          SettledTTL,
				calls:        []call{describe("eks-pool-ng-1")},
			},
		},
		"NodeGroupWithTwoGroups": {
			reason: "Every group a NodeGroup reports is listed, in the order it reports them, and their desired capacities add up.",
			args:   args{groups: map[string]*fnv1.Resource{"workers": observedNodeGroup(t, reports("eks-pool-ng-b", "eks-pool-ng-a"))}, required: supplied},
			want: want{
				requirements: both,
				ids:          []string{"aws:///eu-west-1b/i-nb1", "aws:///eu-west-1c/i-na1"},
				ttl:          SettledTTL,
				calls:        []call{describe("eks-pool-ng-b"), describe("eks-pool-ng-a")},
			},
		},
		"NodeGroupReportsNoGroupYet": {
			reason: "A NodeGroup that reports no Auto Scaling group yet cannot be listed: the observed list is kept, AWS is not called and the function asks to be called again soon.",
			args:   args{observedIDs: []string{oldID}, groups: map[string]*fnv1.Resource{"workers": observedNodeGroup(t)}, required: supplied},
			want:   want{requirements: both, ids: []string{oldID}, ttl: ProgressTTL},
		},
		"NodeGroupGroupUnknownToAWS": {
			reason: "A group a NodeGroup reports that AWS does not know is a warning naming the NodeGroup; the observed list is kept.",
			args:   args{observedIDs: []string{oldID}, groups: map[string]*fnv1.Resource{"workers": observedNodeGroup(t, reports("eks-pool-ng-gone"))}, required: supplied},
			want: want{
				requirements: both,
				ids:          []string{oldID},
				results:      []result{{fnv1.Severity_SEVERITY_WARNING, `NodeGroup "pool-ng": AWS knows no Auto Scaling group "eks-pool-ng-gone" in eu-west-1: was it deleted outside Crossplane?`}},
				ttl:          ProgressTTL,
				calls:        []call{describe("eks-pool-ng-gone")},
			},
		},
		"NodeGroupAWSError": {
			reason: "An AWS error listing a NodeGroup's group is a warning naming the NodeGroup and the group.",
			args:   args{observedIDs: []string{oldID}, groups: map[string]*fnv1.Resource{"workers": observedNodeGroup(t, reports("eks-pool-ng-denied"))}, required: supplied},
			want: want{
				requirements: both,
				ids:          []string{oldID},
				results: []result{{fnv1.Severity_SEVERITY_WARNING, `cannot list the instances of NodeGroup "pool-ng" (Auto Scaling group "eks-pool-ng-denied" in eu-west-1): ` +
					`operation error Auto Scaling: DescribeAutoScalingGroups, https response error StatusCode: 403, api error AccessDenied: not allowed`}},
				ttl:   ProgressTTL,
				calls: []call{describe("eks-pool-ng-denied")},
			},
		},
		"NodeGroupAndAutoscalingGroup": {
			reason: "An XR composing a NodeGroup and an AutoscalingGroup lists both, in the order of their names in the composition, against their summed desired capacities.",
			args: args{groups: map[string]*fnv1.Resource{
				"workers": observedNodeGroup(t, reports("eks-pool-ng-1")),
				"asg":     observedGroup(t, "pool-asg", awsName("pool-b")),
			}, required: supplied},
			want: want{
				requirements: both,
				ids:          []string{"aws:///eu-west-1a/i-n1", "aws:///eu-west-1b/i-b1", "aws:///eu-west-1b/i-n2"},
				ttl:          SettledTTL,
				calls:        []call{describe("pool-b"), describe("eks-pool-ng-1")},
			},
		},
		"NodeGroupProviderConfigReadsXRNamespacesSecret": {
			reason: "A NodeGroup's namespaced ProviderConfig is the XR's namespace's, and its Secret is read there whatever secretRef.namespace says.",
			args: args{groups: map[string]*fnv1.Resource{"workers": observedNodeGroup(t, noNamespace(), configRefOf("ProviderConfig", "eks"), reports("eks-pool-ng-1"))},
				required: map[string]*fnv1.Resources{
					"ProviderConfig/team-a/eks": items(config(t, "ProviderConfig", "team-a", "eks", secretSpec("team-b", staticEndpoint(srv.URL)))),
					"Secret/team-a/aws-creds":   items(creds),
				}},
			want: want{
				requirements: map[string]*fnv1.ResourceSelector{
					"ProviderConfig/team-a/eks": selector("aws.m.upbound.io/v1beta1", "ProviderConfig", "team-a", "eks"),
					"Secret/team-a/aws-creds":   secretSelector,
				},
				ids:   []string{"aws:///eu-west-1a/i-n1", "aws:///eu-west-1b/i-n2"},
				ttl:   SettledTTL,
				calls: []call{describe("eks-pool-ng-1")},
			},
		},
	}
	f := NewFunction(logging.NewNopLogger(), WithHTTPClient(&http.Client{Transport: loopbackOnly{}}))
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := &fnv1.RunFunctionRequest{
				Meta:              &fnv1.RequestMeta{Tag: "tag"},
				Observed:          &fnv1.State{Composite: observedXR(t, tc.args.observedIDs), Resources: tc.args.groups},
				Desired:           &fnv1.State{},
				RequiredResources: tc.args.required,
			}
			rsp, err := f.RunFunction(context.Background(), req)
			if err != nil {
				t.Fatalf("\n%s\nRunFunction(...): %v", tc.reason, err)
			}
			calls := fake.take()
			for i := range calls {
				calls[i].Host = ""
			}
			if diff := cmp.Diff(tc.want.requirements, rsp.GetRequirements().GetResources(), protocmp.Transform()); diff != "" {
				t.Errorf("\n%s\nrequirements: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.ids, outputOf(rsp)); diff != "" {
				t.Errorf("\n%s\nstatus.outputs.providerIDList: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.results, resultsOf(rsp)); diff != "" {
				t.Errorf("\n%s\nresults: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.ttl, rsp.GetMeta().GetTtl().AsDuration()); diff != "" {
				t.Errorf("\n%s\nTTL: -want +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.calls, calls); diff != "" {
				t.Errorf("\n%s\ncalls to AWS: -want +got:\n%s", tc.reason, diff)
			}
			if got := ambient.take(); len(got) > 0 {
				t.Errorf("\n%s\nthe function called the ambient endpoint: %v", tc.reason, got)
			}
		})
	}
}

func TestRunFunctionAssumesRoleChain(t *testing.T) {
	fake := &fakeAWS{groups: map[string]fakeGroup{"pool-b": {desired: 1, instances: []fakeInstance{{"i-b1", "eu-west-1b", "InService"}}}}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	setAmbient(t, srv.URL)
	to, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	spec := secretSpec("team-a", map[string]any{
		"assumeRoleChain": []any{
			map[string]any{"roleARN": "arn:aws:iam::111111111111:role/first", "externalID": "ext-1"},
			map[string]any{"roleARN": "arn:aws:iam::222222222222:role/second"},
		},
		"endpoint": map[string]any{"url": map[string]any{"type": "Static", "static": "http://asg.example.test:4566"}},
	})
	req := &fnv1.RunFunctionRequest{
		Observed: &fnv1.State{Composite: observedXR(t, nil), Resources: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-b"))}},
		RequiredResources: map[string]*fnv1.Resources{
			"ProviderConfig/team-a/aws": items(config(t, "ProviderConfig", "team-a", "aws", spec)),
			"Secret/team-a/aws-creds":   items(secret(t, "team-a", map[string]string{"credentials": secretCredentials})),
		},
	}
	// Every request reaches the fake; the Host says where the client sent it.
	f := NewFunction(logging.NewNopLogger(), WithHTTPClient(&http.Client{Transport: redirect{to: to}}))
	rsp, err := f.RunFunction(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	// As provider-aws does, the chain starts from the Secret's credentials
	// and its STS calls go to AWS's STS endpoint; the group is listed with
	// the last role's credentials at spec.endpoint.
	want := []call{
		{Action: "AssumeRole", Name: "arn:aws:iam::111111111111:role/first", ExternalID: "ext-1", KeyID: "AKIDFROMSECRET", Region: "eu-west-1", Host: "sts.eu-west-1.amazonaws.com"},
		{Action: "AssumeRole", Name: "arn:aws:iam::222222222222:role/second", KeyID: "ASIA-first", Region: "eu-west-1", Host: "sts.eu-west-1.amazonaws.com"},
		{Action: "DescribeAutoScalingGroups", Name: "pool-b", KeyID: "ASIA-second", Region: "eu-west-1", Host: "asg.example.test:4566"},
	}
	if diff := cmp.Diff(want, fake.take()); diff != "" {
		t.Errorf("calls: -want +got:\n%s", diff)
	}
	if diff := cmp.Diff([]string{"aws:///eu-west-1b/i-b1"}, outputOf(rsp)); diff != "" {
		t.Errorf("status.outputs.providerIDList: -want +got:\n%s", diff)
	}
	if len(rsp.GetResults()) > 0 {
		t.Errorf("results: want none, got %v", resultsOf(rsp))
	}
}

func TestRunFunctionKeepsDesiredState(t *testing.T) {
	fake := &fakeAWS{groups: map[string]fakeGroup{"pool-b": {desired: 1, instances: []fakeInstance{{"i-b1", "eu-west-1b", "InService"}}}}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	setAmbient(t, srv.URL)
	desired := func(ids ...string) *fnv1.State {
		outputs := map[string]any{"controlPlaneReady": true}
		if ids != nil {
			outputs["providerIDList"] = strs(ids...)
		}
		return &fnv1.State{
			Composite: &fnv1.Resource{
				Resource:          st(t, map[string]any{"status": map[string]any{"phase": "Composed", "outputs": outputs}}),
				ConnectionDetails: map[string][]byte{"kubeconfig": []byte("k")},
				Ready:             fnv1.Ready_READY_TRUE,
			},
			Resources: map[string]*fnv1.Resource{
				"asg": {Resource: st(t, map[string]any{"apiVersion": "autoscaling.aws.m.upbound.io/v1beta1", "kind": "AutoscalingGroup"}), Ready: fnv1.Ready_READY_TRUE},
			},
		}
	}
	req := &fnv1.RunFunctionRequest{
		Observed: &fnv1.State{Composite: observedXR(t, nil), Resources: map[string]*fnv1.Resource{"asg": observedGroup(t, "pool-asg", awsName("pool-b"))}},
		Desired:  desired(),
		Context:  st(t, map[string]any{"apiextensions.crossplane.io/environment": map[string]any{"k": "v"}}),
		RequiredResources: map[string]*fnv1.Resources{
			"ProviderConfig/team-a/aws": items(config(t, "ProviderConfig", "team-a", "aws", secretSpec("team-a", staticEndpoint(srv.URL)))),
			"Secret/team-a/aws-creds":   items(secret(t, "team-a", map[string]string{"credentials": secretCredentials})),
		},
	}
	wantContext := copyStruct(req.GetContext())
	rsp, err := NewFunction(logging.NewNopLogger()).RunFunction(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(desired("aws:///eu-west-1b/i-b1"), rsp.GetDesired(), protocmp.Transform()); diff != "" {
		t.Errorf("desired state: -want +got:\n%s", diff)
	}
	if diff := cmp.Diff(wantContext, rsp.GetContext(), protocmp.Transform()); diff != "" {
		t.Errorf("context: -want +got:\n%s", diff)
	}
	// With the AWS SDK's own HTTP client too, only the Secret's credentials
	// are used.
	want := []call{{Action: "DescribeAutoScalingGroups", Name: "pool-b", KeyID: "AKIDFROMSECRET", Region: "eu-west-1", Host: strings.TrimPrefix(srv.URL, "http://")}}
	if diff := cmp.Diff(want, fake.take()); diff != "" {
		t.Errorf("calls: -want +got:\n%s", diff)
	}
}

// copyStruct returns a copy of s.
func copyStruct(s *structpb.Struct) *structpb.Struct {
	c, _ := structpb.NewStruct(s.AsMap())
	return c
}
