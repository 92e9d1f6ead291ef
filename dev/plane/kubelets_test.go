package plane

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestHostnameOf(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b"
	cases := map[string]struct {
		node string
		want string
	}{
		"a local Node is named after its Machine and namespace": {
			node: "clusterclass-rollout-gyf7fg-bk747-x9bwp.clusterclass-rollout-483e15",
			want: "clusterclass-rollout-gyf7fg-bk747-x9bwp",
		},
		"an EC2 instance's Node is its instance":   {node: "i-0123456789abcdef0", want: "i-0123456789abcdef0"},
		"a host name longer than a label is cut":   {node: strings.Repeat("x", 70) + ".ns", want: strings.Repeat("x", 63)},
		"a cut host name does not end with a dash": {node: long + ".ns", want: strings.Repeat("a", 62)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := hostnameOf(tc.node)
			if got != tc.want {
				t.Errorf("hostnameOf(%q) = %q, want %q", tc.node, got, tc.want)
			}
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Errorf("hostnameOf(%q) = %q is no label value: %v", tc.node, got, errs)
			}
		})
	}
}
