package asginstances

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

func TestAutoScalingEndpoint(t *testing.T) {
	static := func(u string, services ...string) *endpointSpec {
		e := &endpointSpec{Services: services}
		e.URL.Type, e.URL.Static = endpointStatic, ptr.To(u)
		return e
	}
	with := func(e *endpointSpec, f func(*endpointSpec)) *endpointSpec {
		f(e)
		return e
	}
	type want struct {
		url string
		err string
	}
	cases := map[string]struct {
		reason   string
		endpoint *endpointSpec
		want     want
	}{
		"NoEndpoint": {
			reason: "Without spec.endpoint the function calls AWS's endpoint.",
		},
		"StaticForEveryService": {
			reason:   "A Static URL without services serves every service, as provider-aws's SDK clients use it.",
			endpoint: static("http://127.0.0.1:5000"),
			want:     want{url: "http://127.0.0.1:5000"},
		},
		"StaticForAutoScaling": {
			reason:   "A Static URL listing autoscaling serves Auto Scaling.",
			endpoint: static("https://autoscaling.internal", "ec2", "autoscaling"),
			want:     want{url: "https://autoscaling.internal"},
		},
		"StaticForOtherServices": {
			reason:   "A Static URL listing other services only does not serve Auto Scaling, as provider-aws's Terraform client uses it.",
			endpoint: static("http://127.0.0.1:5000", "ec2"),
		},
		"StaticWithoutURL": {
			reason:   "A Static endpoint needs a URL.",
			endpoint: with(static(""), func(e *endpointSpec) { e.URL.Static = nil }),
			want:     want{err: `spec.endpoint.url.static "" is not an http or https URL`},
		},
		"StaticNotHTTP": {
			reason:   "A Static URL must be http or https with a host.",
			endpoint: static("127.0.0.1:5000"),
			want:     want{err: `spec.endpoint.url.static "127.0.0.1:5000" is not an http or https URL`},
		},
		"Auto": {
			reason:   "Auto is AWS's own endpoints.",
			endpoint: with(&endpointSpec{PartitionID: ptr.To("aws")}, func(e *endpointSpec) { e.URL.Type = endpointAuto }),
		},
		"AutoWithoutPartition": {
			reason:   "Auto needs a partition, as provider-aws requires.",
			endpoint: with(&endpointSpec{}, func(e *endpointSpec) { e.URL.Type = endpointAuto }),
			want:     want{err: "spec.endpoint.url.type is Auto but spec.endpoint.partitionId is not set"},
		},
		"UnknownType": {
			reason:   "An unknown type is refused.",
			endpoint: with(&endpointSpec{}, func(e *endpointSpec) { e.URL.Type = "Magic" }),
			want:     want{err: `spec.endpoint.url.type "Magic" is not supported: function-asg-instances honours Static and Auto only`},
		},
		"MatchingSigning": {
			reason: "Signing fields that sign as Auto Scaling does change nothing.",
			endpoint: with(static("http://127.0.0.1:5000"), func(e *endpointSpec) {
				e.SigningName, e.SigningRegion, e.SigningMethod = ptr.To("autoscaling"), ptr.To("eu-west-1"), ptr.To("v4")
			}),
			want: want{url: "http://127.0.0.1:5000"},
		},
		"OtherSigningName": {
			reason:   "Signing as another service is refused.",
			endpoint: with(static("http://127.0.0.1:5000"), func(e *endpointSpec) { e.SigningName = ptr.To("ec2") }),
			want:     want{err: `spec.endpoint: signingName "ec2" is not supported: function-asg-instances signs as "autoscaling"`},
		},
		"OtherSigningRegion": {
			reason:   "Signing for another region is refused.",
			endpoint: with(static("http://127.0.0.1:5000"), func(e *endpointSpec) { e.SigningRegion = ptr.To("us-east-1") }),
			want:     want{err: `spec.endpoint: signingRegion "us-east-1" is not supported: function-asg-instances signs for the group's region "eu-west-1"`},
		},
		"OtherSigningMethod": {
			reason:   "Another signing method is refused.",
			endpoint: with(static("http://127.0.0.1:5000"), func(e *endpointSpec) { e.SigningMethod = ptr.To("v4a") }),
			want:     want{err: `spec.endpoint: signingMethod "v4a" is not supported: function-asg-instances signs with v4`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u, err := autoScalingEndpoint(tc.endpoint, "eu-west-1")
			got := want{url: u}
			if err != nil {
				got.err = err.Error()
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("\n%s\nautoScalingEndpoint(...): -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
