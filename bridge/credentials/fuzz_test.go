package credentials

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// Whatever the grants say, the grant check answers without a panic; a grant
// it cannot read is an error naming the grant and the field, and a refusal
// says which namespace may not use which config.
func FuzzGranted(f *testing.F) {
	f.Add(
		[]byte(`[{"metadata":{"name":"g"},"spec":{"providerConfigRef":{"apiGroup":"aws.m.upbound.io","name":"shared"},"allowedNamespaces":{"names":["team-a"],"selector":{"matchExpressions":[{"key":"team","operator":"In","values":["a"]}]}}}}]`),
		[]byte(`{"APIGroup":"aws.m.upbound.io","Name":"shared"}`),
		[]byte(`{"metadata":{"name":"team-b","labels":{"team":"a"}}}`),
	)
	f.Fuzz(func(t *testing.T, grantsData, refData, nsData []byte) {
		var grants []infrav1.ClusterProviderConfigGrant
		var ref Shared
		ns := &corev1.Namespace{}
		if json.Unmarshal(grantsData, &grants) != nil || json.Unmarshal(refData, &ref) != nil || json.Unmarshal(nsData, ns) != nil {
			return
		}
		ok, msg, err := Granted(grants, ref, ns)
		switch {
		case err != nil:
			if ok || !strings.Contains(err.Error(), "spec.allowedNamespaces.selector") || !strings.Contains(err.Error(), "grant ") {
				t.Errorf("an unreadable grant's error names no grant or field (granted %t): %v", ok, err)
			}
		case ok && msg != "":
			t.Errorf("granted with a refusal: %s", msg)
		case !ok && !strings.Contains(msg, "namespace "+ns.Name+" may not use"):
			t.Errorf("a refusal that does not say who may not use what: %q", msg)
		}
	})
}
