package plane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
)

func TestWebhookConfigurations(t *testing.T) {
	const shipped = `---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service:
      name: webhook-service
      namespace: system
      path: /mutate-cluster-x-k8s-io-v1beta2-cluster
  failurePolicy: Fail
  name: default.cluster.cluster.x-k8s.io
  sideEffects: None
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service:
      name: webhook-service
      namespace: system
      path: /validate-cluster-x-k8s-io-v1beta2-cluster
  failurePolicy: Fail
  name: validation.cluster.cluster.x-k8s.io
  sideEffects: None
`
	cases := map[string]struct {
		content  string
		wantURLs []string
		wantErr  string
	}{
		"each webhook at the process's server and its path": {content: shipped, wantURLs: []string{
			"https://127.0.0.1:9443/mutate-cluster-x-k8s-io-v1beta2-cluster",
			"https://127.0.0.1:9443/validate-cluster-x-k8s-io-v1beta2-cluster"}},
		"a webhook without a Service": {content: "kind: ValidatingWebhookConfiguration\nmetadata: {name: v}\nwebhooks:\n- name: w\n  clientConfig: {url: 'https://elsewhere'}\n", wantErr: "names no Service"},
		"another kind":                {content: "kind: ConfigMap\nmetadata: {name: c}\n", wantErr: "not a webhook configuration"},
		"nothing":                     {content: "# empty\n", wantErr: "no webhook configuration"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "manifests.yaml")
			if err := os.WriteFile(file, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			objs, err := webhookConfigurations(file, "capi", "https://127.0.0.1:9443", []byte("CA"))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var urls []string
			for _, o := range objs {
				if !strings.HasPrefix(o.GetName(), "capi-") {
					t.Errorf("configuration %s is not named after the process", o.GetName())
				}
				var configs []admissionv1.WebhookClientConfig
				switch c := o.(type) {
				case *admissionv1.MutatingWebhookConfiguration:
					for _, w := range c.Webhooks {
						configs = append(configs, w.ClientConfig)
					}
				case *admissionv1.ValidatingWebhookConfiguration:
					for _, w := range c.Webhooks {
						configs = append(configs, w.ClientConfig)
					}
				}
				for _, cc := range configs {
					if cc.Service != nil || string(cc.CABundle) != "CA" || cc.URL == nil {
						t.Errorf("client config %+v, want the URL and the CA only", cc)
						continue
					}
					urls = append(urls, *cc.URL)
				}
			}
			if strings.Join(urls, " ") != strings.Join(tc.wantURLs, " ") {
				t.Errorf("URLs %v, want %v", urls, tc.wantURLs)
			}
		})
	}
}
