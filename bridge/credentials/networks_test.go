package credentials

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestNetworks(t *testing.T) {
	mr := func(name string, atProvider map[string]any) unstructured.Unstructured {
		u := unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"atProvider": atProvider}}}
		u.SetName(name)
		return u
	}
	vpc, subnet := AWSNetworkKinds[0], AWSNetworkKinds[1]
	cases := map[string]struct {
		reason string
		kind   NetworkKind
		objs   []unstructured.Unstructured
		owned  map[string]string
		want   map[string]string
	}{
		"VPCOwnsItsDefaultSecurityGroup": {
			reason: "a VPC reports its ID and its default security group's, where AWS puts an instance named without groups",
			kind:   vpc,
			objs:   []unstructured.Unstructured{mr("alpha-vpc", map[string]any{"id": "vpc-1", "defaultSecurityGroupId": "sg-d", "cidrBlock": "10.0.0.0/16"})},
			want:   map[string]string{"vpc-1": "VPC alpha-vpc", "sg-d": "VPC alpha-vpc"},
		},
		"NotYetCreated": {
			reason: "a managed resource whose provider has not reported an ID owns nothing yet",
			kind:   subnet,
			objs:   []unstructured.Unstructured{mr("pending", map[string]any{}), mr("empty", map[string]any{"id": ""}), {Object: map[string]any{}}},
			want:   map[string]string{},
		},
		"Added": {
			reason: "each kind's IDs are added to what the others reported",
			kind:   subnet,
			objs:   []unstructured.Unstructured{mr("a", map[string]any{"id": "subnet-a"}), mr("b", map[string]any{"id": "subnet-b", "vpcId": "vpc-other"})},
			owned:  map[string]string{"vpc-1": "VPC alpha-vpc"},
			want:   map[string]string{"vpc-1": "VPC alpha-vpc", "subnet-a": "Subnet a", "subnet-b": "Subnet b"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.owned
			if got == nil {
				got = map[string]string{}
			}
			Networks(tc.kind, tc.objs, got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nNetworks(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
