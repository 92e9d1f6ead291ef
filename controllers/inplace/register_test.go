package inplace

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/capxp/cluster-api-provider-crossplane/controllers/webhook"
)

func TestExtensionConfig(t *testing.T) {
	cases := map[string]struct {
		reason string
		cc     webhook.ClientConfig
		want   string
	}{
		"URL": {
			reason: "a manager outside the cluster is called at its URL, trusted by the bundle given; no CA is injected",
			cc:     webhook.ClientConfig{URL: "https://127.0.0.1:9443", CABundle: []byte("CA"), CASecret: "capxp-system/cert"},
			want:   `{"clientConfig":{"caBundle":"Q0E=","url":"https://127.0.0.1:9443"},"namespaceSelector":{}}`,
		},
		"Service": {
			reason: "in a cluster, by the webhook's Service, the CA injected by CAPI from the certificate's Secret",
			cc:     webhook.ClientConfig{ServiceNamespace: "capxp-system", ServiceName: "capxp-webhook-service", ServicePort: 443, CASecret: "capxp-system/cert"},
			want:   `{"clientConfig":{"service":{"name":"capxp-webhook-service","namespace":"capxp-system","port":443}},"namespaceSelector":{}}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u, err := ExtensionConfig(&tc.cc, nil)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := json.Marshal(u.Object["spec"])
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(spec)); diff != "" {
				t.Errorf("%s\nExtensionConfig(): spec -want, +got:\n%s", tc.reason, diff)
			}
			injected := u.GetAnnotations()["runtime.cluster.x-k8s.io/inject-ca-from-secret"]
			if want := map[string]string{"URL": "", "Service": "capxp-system/cert"}[name]; injected != want {
				t.Errorf("%s\nExtensionConfig(): injected from %q, want %q", tc.reason, injected, want)
			}
		})
	}
}
