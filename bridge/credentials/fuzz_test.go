package credentials

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// Whatever the grants say, the grant check answers without a panic and
// without an error: a grant it cannot read grants nothing, and the refusal
// names it; a refusal says which namespace may not use which config.
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
			t.Errorf("a grant stopped the check instead of granting nothing: %v", err)
		case ok && msg != "":
			t.Errorf("granted with a refusal: %s", msg)
		case !ok && !strings.Contains(msg, "namespace "+ns.Name+" may not use"):
			t.Errorf("a refusal that does not say who may not use what: %q", msg)
		}
	})
}

// Whatever a namespace's own configs and the grants say, the record is
// computed without an error, and is consistent: a config is listed or
// refused, never both; a listed config of its own is locked; a refusal
// says why; the record stays within its bounds.
func FuzzUsable(f *testing.F) {
	f.Add(
		[]byte(`[{"metadata":{"name":"g"},"spec":{"credentialSource":{"apiGroup":"aws.m.upbound.io","source":"IRSA"},"allowedNamespaces":{"selector":{"matchLabels":{"team":"not a value"}}},"allowedRoles":["111111111111"]}}]`),
		[]byte(`{"credentials":{"source":"IRSA"},"assumeRoleChain":[{"roleARN":"arn:aws:iam::111111111111:role/x"}],"endpoint":{"url":{"static":"https://x"}}}`),
		[]byte(`{"credentials":{"source":"Secret","secretRef":{"name":"a/b","key":"kubeconfig"}}}`),
		[]byte(`{"apiVersion":"v1","kind":"Config","users":[{"name":"u","user":{"tokenFile":"/dev/zero"}}]}`),
	)
	f.Fuzz(func(t *testing.T, grantsData, awsSpec, kubeSpec, secret []byte) {
		var grants []infrav1.ClusterProviderConfigGrant
		var a, k map[string]any
		if json.Unmarshal(grantsData, &grants) != nil || json.Unmarshal(awsSpec, &a) != nil || json.Unmarshal(kubeSpec, &k) != nil {
			return
		}
		secrets := map[string]map[string][]byte{}
		for _, c := range []map[string]any{a, k} {
			for _, n := range SecretsNamed(fieldpath.Pave(map[string]any{"spec": c})) {
				secrets[n] = map[string][]byte{"kubeconfig": secret, "credentials": secret}
			}
		}
		own := []OwnConfig{
			{Provider: DefaultProviders[0], Name: "aws", Spec: fieldpath.Pave(map[string]any{"spec": a}), Secrets: secrets},
			{Provider: DefaultProviders[1], Name: "kube", Spec: fieldpath.Pave(map[string]any{"spec": k}), Secrets: secrets},
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"team": "a"}}}
		rec, err := Usable(ns, grants, DefaultProviders, own, false, nil)
		if err != nil {
			t.Fatalf("the record could not be computed: %v", err)
		}
		listed := map[infrav1.UsableConfig]bool{}
		for _, c := range rec.Configs {
			listed[c] = true
		}
		locked := map[infrav1.LockedObject]bool{}
		for _, l := range rec.Locked {
			locked[l] = true
		}
		for _, r := range rec.Refused {
			if listed[r.UsableConfig] {
				t.Errorf("%v is both listed and refused (%s)", r.UsableConfig, r.Reason)
			}
			if r.Reason == "" || r.Message == "" || len(r.Message) > 1024 {
				t.Errorf("a refusal of %v without a reason or a message, or too long: %q %q", r.UsableConfig, r.Reason, r.Message)
			}
		}
		for i := range own {
			u := infrav1.UsableConfig{APIGroup: own[i].Provider.ConfigGroup, Kind: infrav1.ProviderConfigKindNamespaced, Name: own[i].Name}
			if !listed[u] {
				continue
			}
			for _, l := range Locks(&own[i]) {
				if !locked[l] {
					t.Errorf("%v is listed but %v is not locked", u, l)
				}
			}
		}
	})
}
