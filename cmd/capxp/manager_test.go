package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

func TestFromCrossplaneRuntime(t *testing.T) {
	crossplane := map[string]string{envPodNamespace: "crossplane-system", envProviderName: "capxp", envTLSServerCertsDir: "/tls/server"}
	type webhook struct {
		Service, URL, CertDir, CABundleFile, CAInjectionFrom string
		ServicePort                                          int
	}
	defaults := webhook{CertDir: "/tmp/k8s-webhook-server/serving-certs", ServicePort: 443}
	cases := map[string]struct {
		env  map[string]string
		args []string
		want webhook
	}{
		"outside Crossplane's runtime: no webhook unless a flag says": {
			env:  map[string]string{envPodNamespace: "capxp-system"},
			want: defaults,
		},
		"a clusterctl Deployment's flags": {
			env:  map[string]string{envPodNamespace: "capxp-system"},
			args: []string{"--webhook-service=capxp-system/capxp-webhook-service", "--webhook-ca-injection-from=capxp-system/capxp-serving-cert"},
			want: webhook{Service: "capxp-system/capxp-webhook-service", CertDir: defaults.CertDir, ServicePort: 443, CAInjectionFrom: "capxp-system/capxp-serving-cert"},
		},
		"a provider package: its Provider's Service, Crossplane's certificate and CA": {
			env:  crossplane,
			want: webhook{Service: "crossplane-system/capxp", ServicePort: 9443, CertDir: "/tls/server", CABundleFile: "/tls/server/ca.crt"},
		},
		"a provider package with a URL: the certificate still Crossplane's": {
			env:  crossplane,
			args: []string{"--webhook-url=https://127.0.0.1:30443", "--webhook-ca-bundle-file=/plane/ca.crt"},
			want: webhook{URL: "https://127.0.0.1:30443", ServicePort: 9443, CertDir: "/tls/server", CABundleFile: "/plane/ca.crt"},
		},
		"a provider package whose runtime configuration names another Service": {
			env:  crossplane,
			args: []string{"--webhook-service=crossplane-system/webhooks", "--webhook-service-port=443", "--webhook-cert-dir=/certs", "--webhook-ca-injection-from=crossplane-system/cert"},
			want: webhook{Service: "crossplane-system/webhooks", ServicePort: 443, CertDir: "/certs", CAInjectionFrom: "crossplane-system/cert"},
		},
		"a Provider's name without the certificate: not Crossplane's runtime": {
			env:  map[string]string{envPodNamespace: "crossplane-system", envProviderName: "capxp"},
			want: defaults,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &managerFlags{}
			fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
			f.add(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			f.fromCrossplaneRuntime(func(k string) string { return tc.env[k] }, fs.Changed)
			got := webhook{Service: f.webhookService, URL: f.webhookURL, CertDir: f.webhookCertDir, CABundleFile: f.webhookCABundleFile,
				CAInjectionFrom: f.webhookCAInjectionFrom, ServicePort: f.webhookServicePort}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("webhook flags (-want +got):\n%s", d)
			}
		})
	}
}
