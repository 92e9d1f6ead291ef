package credentials

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

var (
	kubeProvider = Provider{ConfigGroup: "kubernetes.m.crossplane.io", ManagedGroup: "kubernetes.m.crossplane.io", Secret: SecretKubeconfig}
	awsProvider  = Provider{ConfigGroup: "aws.m.upbound.io", ManagedGroup: "aws.m.upbound.io", Secret: SecretAWS}
)

const (
	staticKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	execKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ["-c", "id"]}}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	tokenFileKubeconfig    = `{"apiVersion":"v1","kind":"Config","users":[{"name":"u","user":{"tokenFile":"/var/run/secrets/kubernetes.io/serviceaccount/token"}}]}`
	authProviderKubeconfig = `apiVersion: v1
kind: Config
users: [{name: u, user: {auth-provider: {name: oidc, config: {idp-issuer-url: "https://x"}}}}]
`
)

func ownConfig(p Provider, name string, spec map[string]any, secrets map[string]map[string][]byte) OwnConfig {
	return OwnConfig{Provider: p, Name: name, Spec: fieldpath.Pave(map[string]any{"spec": spec}), Secrets: secrets}
}

func secretSpec(name, key string) map[string]any {
	return map[string]any{"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"name": name, "key": key}}}
}

func TestUsable(t *testing.T) {
	type want struct {
		configs []string
		refused map[string]string // name -> reason
		msg     map[string]string // name -> a substring of its message
	}
	ungrantedCPC := grant("g", infrav1.ClusterProviderConfigReference{APIGroup: "kubernetes.m.crossplane.io", Name: "shared"}, infrav1.AllowedNamespaces{Names: []string{"team-b"}})
	grantedCPC := grant("g2", infrav1.ClusterProviderConfigReference{APIGroup: "kubernetes.m.crossplane.io", Name: "granted"}, infrav1.AllowedNamespaces{Names: []string{"team-a"}})
	otherProvider := grant("g3", infrav1.ClusterProviderConfigReference{APIGroup: "gcp.m.upbound.io", Name: "x"}, infrav1.AllowedNamespaces{Names: []string{"team-a"}})
	injected := sourceGrant("g4", infrav1.CredentialSourceReference{APIGroup: "aws.m.upbound.io", Source: "IRSA"}, infrav1.AllowedNamespaces{Names: []string{"team-a"}})
	cases := map[string]struct {
		reason string
		grants []infrav1.ClusterProviderConfigGrant
		own    []OwnConfig
		want   want
	}{
		"Nothing": {
			reason: "a namespace with no configs and no grants may name nothing",
		},
		"GrantedClusterConfigs": {
			reason: "only ClusterProviderConfigs granted to the namespace, of an enforced provider, are listed",
			grants: []infrav1.ClusterProviderConfigGrant{ungrantedCPC, grantedCPC, otherProvider},
			want:   want{configs: []string{"kubernetes.m.crossplane.io/ClusterProviderConfig/granted"}},
		},
		"OwnStaticKubeconfig": {
			reason: "a ProviderConfig whose Secret holds a kubeconfig acting as itself is the namespace's own",
			own:    []OwnConfig{ownConfig(kubeProvider, "mine", secretSpec("s", "kubeconfig"), map[string]map[string][]byte{"s": {"kubeconfig": []byte(staticKubeconfig)}})},
			want:   want{configs: []string{"kubernetes.m.crossplane.io/ProviderConfig/mine"}},
		},
		"OwnExecKubeconfig": {
			reason: "a kubeconfig that runs a command acts as the provider: shared",
			own:    []OwnConfig{ownConfig(kubeProvider, "exec", secretSpec("s", "kubeconfig"), map[string]map[string][]byte{"s": {"kubeconfig": []byte(execKubeconfig)}})},
			want: want{refused: map[string]string{"exec": infrav1.SharedIdentityInSecretReason},
				msg: map[string]string{"exec": `user "u": exec`}},
		},
		"OwnTokenFileKubeconfig": {
			reason: "a kubeconfig reading a token file of the provider's (JSON form): shared",
			own:    []OwnConfig{ownConfig(kubeProvider, "tf", secretSpec("s", "k"), map[string]map[string][]byte{"s": {"k": []byte(tokenFileKubeconfig)}})},
			want:   want{refused: map[string]string{"tf": infrav1.SharedIdentityInSecretReason}, msg: map[string]string{"tf": "tokenFile"}},
		},
		"OwnAuthProviderKubeconfig": {
			reason: "an auth-provider plugin acts with the provider's environment: shared",
			own:    []OwnConfig{ownConfig(kubeProvider, "ap", secretSpec("s", "k"), map[string]map[string][]byte{"s": {"k": []byte(authProviderKubeconfig)}})},
			want:   want{refused: map[string]string{"ap": infrav1.SharedIdentityInSecretReason}, msg: map[string]string{"ap": "auth-provider"}},
		},
		"UnreadableKubeconfig": {
			reason: "what the bridge cannot read it cannot call the namespace's own",
			own:    []OwnConfig{ownConfig(kubeProvider, "bad", secretSpec("s", "k"), map[string]map[string][]byte{"s": {"k": []byte("{not yaml")}})},
			want:   want{refused: map[string]string{"bad": infrav1.SharedIdentityInSecretReason}, msg: map[string]string{"bad": "cannot be read"}},
		},
		"MissingSecret": {
			reason: "a config whose Secret does not exist is not usable",
			own:    []OwnConfig{ownConfig(kubeProvider, "m", secretSpec("nope", "k"), nil)},
			want:   want{refused: map[string]string{"m": infrav1.CredentialsSecretNotFoundReason}},
		},
		"MissingKey": {
			reason: "a config whose Secret lacks the key is not usable",
			own:    []OwnConfig{ownConfig(kubeProvider, "m", secretSpec("s", "other"), map[string]map[string][]byte{"s": {"k": []byte(staticKubeconfig)}})},
			want:   want{refused: map[string]string{"m": infrav1.CredentialsSecretNotFoundReason}, msg: map[string]string{"m": `no key "other"`}},
		},
		"SecretInAnotherNamespace": {
			reason: "a tenant's config may not read another namespace's Secret",
			own: []OwnConfig{ownConfig(kubeProvider, "x", map[string]any{"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"name": "s", "namespace": "team-b", "key": "k"}}},
				map[string]map[string][]byte{"s": {"k": []byte(staticKubeconfig)}})},
			want: want{refused: map[string]string{"x": infrav1.SecretOutsideNamespaceReason}},
		},
		"AmbientUngranted": {
			reason: "an ambient source needs a grant",
			own:    []OwnConfig{ownConfig(kubeProvider, "default", map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}}, nil)},
			want: want{refused: map[string]string{"default": infrav1.ProviderConfigNotGrantedReason},
				msg: map[string]string{"default": "credentialSource kubernetes.m.crossplane.io/InjectedIdentity covering namespace team-a is missing"}},
		},
		"AmbientGranted": {
			reason: "an ambient source granted to the namespace makes its config usable",
			grants: []infrav1.ClusterProviderConfigGrant{injected},
			own:    []OwnConfig{ownConfig(awsProvider, "irsa", map[string]any{"credentials": map[string]any{"source": "IRSA"}}, nil)},
			want:   want{configs: []string{"aws.m.upbound.io/ProviderConfig/irsa"}},
		},
		"NoSource": {
			reason: "a config without a source is not the namespace's own",
			own:    []OwnConfig{ownConfig(kubeProvider, "n", map[string]any{}, nil)},
			want:   want{refused: map[string]string{"n": infrav1.ProviderConfigNotGrantedReason}},
		},
		"IdentityInSecret": {
			reason: "a cloud identity in a Secret is not judged as the namespace's own",
			own: []OwnConfig{ownConfig(kubeProvider, "gke", map[string]any{
				"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"name": "s", "key": "k"}},
				"identity":    map[string]any{"type": "GoogleApplicationCredentials", "source": "Secret", "secretRef": map[string]any{"name": "s", "key": "k"}},
			}, map[string]map[string][]byte{"s": {"k": []byte(staticKubeconfig)}})},
			want: want{refused: map[string]string{"gke": infrav1.SharedIdentityInSecretReason}},
		},
		"IdentityInjectedUngranted": {
			reason: "a kubeconfig of the tenant's with the provider's injected cloud identity added needs a grant",
			own: []OwnConfig{ownConfig(kubeProvider, "eks", map[string]any{
				"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"name": "s", "key": "k"}},
				"identity":    map[string]any{"type": "AWSWebIdentityCredentials", "source": "InjectedIdentity"},
			}, map[string]map[string][]byte{"s": {"k": []byte(staticKubeconfig)}})},
			want: want{refused: map[string]string{"eks": infrav1.ProviderConfigNotGrantedReason}},
		},
		"AWSProfileIsStatic": {
			reason: "provider-upjet-aws reads only static keys of its Secret: a credential_process in it is ignored, so the Secret is the namespace's own",
			own: []OwnConfig{ownConfig(awsProvider, "keys", secretSpec("s", "creds"), map[string]map[string][]byte{"s": {"creds": []byte(
				"[default]\naws_access_key_id = AKIA\naws_secret_access_key = x\ncredential_process = /bin/id\n")}})},
			want: want{configs: []string{"aws.m.upbound.io/ProviderConfig/keys"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Usable(teamA(nil), tc.grants, []Provider{awsProvider, kubeProvider}, tc.own, false)
			if err != nil {
				t.Fatalf("%s: Usable(...): %v", tc.reason, err)
			}
			var configs []string
			for _, c := range got.Configs {
				configs = append(configs, key(c))
			}
			if diff := cmp.Diff(tc.want.configs, configs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: configs -want +got:\n%s", tc.reason, diff)
			}
			refused := map[string]string{}
			for _, r := range got.Refused {
				refused[r.Name] = r.Reason
				if want := tc.want.msg[r.Name]; !strings.Contains(r.Message, want) {
					t.Errorf("%s: message of %s %q does not say %q", tc.reason, r.Name, r.Message, want)
				}
			}
			if diff := cmp.Diff(tc.want.refused, refused, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: refused -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestParseProvider(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   Provider
		err    string
	}{
		"Shipped":      {reason: "a shipped backend's group stands for its default", in: "aws.m.upbound.io", want: awsProvider},
		"Full":         {reason: "another provider names its groups and format", in: "creds.example.io:example.io:static", want: Provider{ConfigGroup: "creds.example.io", ManagedGroup: "example.io", Secret: SecretStatic}},
		"Unknown":      {reason: "an unknown group alone cannot be judged", in: "gcp.m.upbound.io", err: "not a shipped provider's group"},
		"BadFormat":    {reason: "a format the bridge cannot judge is refused", in: "a.io:a.io:json", err: `secret format "json"`},
		"EmptyGroup":   {reason: "groups must be given", in: ":a.io:static", err: "must not be empty"},
		"WrongFields":  {reason: "two fields are neither form", in: "a.io:b.io", err: "want CONFIG_GROUP"},
		"ManagesChild": {reason: "a provider manages its subdomains' kinds", in: "kubernetes.m.crossplane.io", want: kubeProvider},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseProvider(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%s: ParseProvider(%q): want error %q, got %v", tc.reason, tc.in, tc.err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: ParseProvider(%q): %v", tc.reason, tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
	if !awsProvider.Manages("ec2.aws.m.upbound.io") || awsProvider.Manages("evilaws.m.upbound.io") || awsProvider.Manages("aws.m.upbound.io.evil") {
		t.Error("Manages: a provider manages its group and its subdomains only")
	}
}

// Whatever a Secret holds, the judge answers without a panic, and a
// kubeconfig it calls the namespace's own gives, through client-go, no
// client for any of its contexts that runs a command, asks a plugin or reads
// a token file.
func FuzzSharedInSecret(f *testing.F) {
	for _, s := range []string{staticKubeconfig, execKubeconfig, tokenFileKubeconfig, authProviderKubeconfig, "{}", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if SharedInSecret(SecretKubeconfig, data) != "" {
			return
		}
		cfg, err := clientcmd.Load(data)
		if err != nil {
			t.Fatalf("judged own, but client-go cannot read it: %v", err)
		}
		for name := range cfg.Contexts {
			rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, name, nil, nil).ClientConfig()
			if err != nil {
				continue
			}
			if rc.ExecProvider != nil || rc.AuthProvider != nil || rc.BearerTokenFile != "" {
				t.Errorf("judged own, but context %q reaches beyond the file: %q", name, data)
			}
		}
	})
}
