package credentials

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	rolesGrant := sourceGrant("g5", infrav1.CredentialSourceReference{APIGroup: "aws.m.upbound.io", Source: "IRSA"}, infrav1.AllowedNamespaces{Names: []string{"team-a"}})
	rolesGrant.Spec.AllowedRoles = []string{"arn:aws:iam::111111111111:role/team-a", "222222222222"}
	webGrant := sourceGrant("g6", infrav1.CredentialSourceReference{APIGroup: "aws.m.upbound.io", Source: "WebIdentity"}, infrav1.AllowedNamespaces{Names: []string{"team-a"}})
	webGrant.Spec.AllowedRoles = rolesGrant.Spec.AllowedRoles
	brokenSelector := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}}
	brokenCPC := grant("broken", infrav1.ClusterProviderConfigReference{APIGroup: "kubernetes.m.crossplane.io", Name: "shared"}, infrav1.AllowedNamespaces{Selector: brokenSelector})
	brokenSource := sourceGrant("broken-source", infrav1.CredentialSourceReference{APIGroup: "aws.m.upbound.io", Source: "IRSA"}, infrav1.AllowedNamespaces{Selector: brokenSelector})
	unreadable := ownConfig(kubeProvider, "unreadable", secretSpec("s", "kubeconfig"), map[string]map[string][]byte{})
	unreadable.Unreadable = map[string]string{"s": "Secret team-a/s cannot be read (InternalError); it is read again"}
	cases := map[string]struct {
		reason string
		grants []infrav1.ClusterProviderConfigGrant
		own    []OwnConfig
		prev   *infrav1.NamespaceCredentialsSpec
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
		"AmbientAssumesUnlistedRole": {
			reason: "a granted ambient source grants acting as it, not assuming a role its grant does not list (another team's account)",
			grants: []infrav1.ClusterProviderConfigGrant{injected},
			own: []OwnConfig{ownConfig(awsProvider, "irsa", map[string]any{"credentials": map[string]any{"source": "IRSA"},
				"assumeRoleChain": []any{map[string]any{"roleARN": "arn:aws:iam::999999999999:role/other-team"}}}, nil)},
			want: want{refused: map[string]string{"irsa": infrav1.ProviderConfigNotGrantedReason},
				msg: map[string]string{"irsa": `assumes "arn:aws:iam::999999999999:role/other-team", which no grant of it lists in allowedRoles`}},
		},
		"AmbientAssumesListedRole": {
			reason: "a role the grant lists, by ARN or by its account, may be assumed",
			grants: []infrav1.ClusterProviderConfigGrant{rolesGrant, webGrant},
			own: []OwnConfig{
				ownConfig(awsProvider, "by-arn", map[string]any{"credentials": map[string]any{"source": "IRSA"},
					"assumeRoleChain": []any{map[string]any{"roleARN": "arn:aws:iam::111111111111:role/team-a"}}}, nil),
				ownConfig(awsProvider, "by-account", map[string]any{"credentials": map[string]any{"source": "WebIdentity",
					"webIdentity": map[string]any{"roleARN": "arn:aws:iam::222222222222:role/anything"}}}, nil),
			},
			want: want{configs: []string{"aws.m.upbound.io/ProviderConfig/by-account", "aws.m.upbound.io/ProviderConfig/by-arn"}},
		},
		"AmbientWebIdentityUnlistedRole": {
			reason: "a web identity's role is pinned as a chained one is; an account ID in the role's path is not its account",
			grants: []infrav1.ClusterProviderConfigGrant{webGrant},
			own: []OwnConfig{ownConfig(awsProvider, "web", map[string]any{"credentials": map[string]any{"source": "WebIdentity",
				"webIdentity": map[string]any{"roleARN": "arn:aws:iam::333333333333:role/222222222222"}}}, nil)},
			want: want{refused: map[string]string{"web": infrav1.ProviderConfigNotGrantedReason}, msg: map[string]string{"web": "333333333333:role/222222222222"}},
		},
		"AmbientOwnEndpoint": {
			reason: "an ambient identity's requests, its session token among them, go to no endpoint of the tenant's",
			grants: []infrav1.ClusterProviderConfigGrant{injected},
			own: []OwnConfig{ownConfig(awsProvider, "irsa", map[string]any{"credentials": map[string]any{"source": "IRSA"},
				"endpoint": map[string]any{"url": map[string]any{"type": "Static", "static": "https://collector.example"}}}, nil)},
			want: want{refused: map[string]string{"irsa": infrav1.ProviderConfigNotGrantedReason}, msg: map[string]string{"irsa": "spec.endpoint.url"}},
		},
		"OwnKeysAssumeAnyRole": {
			reason: "the namespace's own keys assume what they may: the role chain is theirs to name",
			own: []OwnConfig{ownConfig(awsProvider, "keys", map[string]any{"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"name": "s", "key": "creds"}},
				"assumeRoleChain": []any{map[string]any{"roleARN": "arn:aws:iam::999999999999:role/x"}}}, map[string]map[string][]byte{"s": {"creds": []byte("[default]\naws_access_key_id = A\n")}})},
			want: want{configs: []string{"aws.m.upbound.io/ProviderConfig/keys"}},
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
		"CarriedWhileLocked": {
			reason: "a config listed and locked in the previous record keeps its verdict unread: nothing it was judged on can have changed",
			own:    []OwnConfig{unreadMine()},
			prev: &infrav1.NamespaceCredentialsSpec{Configs: []infrav1.UsableConfig{{APIGroup: "kubernetes.m.crossplane.io", Kind: infrav1.ProviderConfigKindNamespaced, Name: "mine"}},
				Locked: []infrav1.LockedObject{{APIGroup: "kubernetes.m.crossplane.io", Kind: "ProviderConfig", Name: "mine"}, {Kind: "Secret", Name: "s"}}},
			want: want{configs: []string{"kubernetes.m.crossplane.io/ProviderConfig/mine"}},
		},
		"ListedButUnlockedIsNotCarried": {
			reason: "a config listed without its Secret locked could have changed: unread, it is not judged yet",
			own:    []OwnConfig{unreadMine()},
			prev: &infrav1.NamespaceCredentialsSpec{Configs: []infrav1.UsableConfig{{APIGroup: "kubernetes.m.crossplane.io", Kind: infrav1.ProviderConfigKindNamespaced, Name: "mine"}},
				Locked: []infrav1.LockedObject{{APIGroup: "kubernetes.m.crossplane.io", Kind: "ProviderConfig", Name: "mine"}}},
			want: want{refused: map[string]string{"mine": infrav1.NotJudgedYetReason}},
		},
		"UnreadKeepsItsRefusal": {
			reason: "a refused config not read again stays refused, for the same reason",
			own:    []OwnConfig{unreadMine()},
			prev: &infrav1.NamespaceCredentialsSpec{Refused: []infrav1.RefusedConfig{{UsableConfig: infrav1.UsableConfig{APIGroup: "kubernetes.m.crossplane.io", Kind: infrav1.ProviderConfigKindNamespaced, Name: "mine"},
				Reason: infrav1.CredentialsSecretNotFoundReason, Message: "Secret s does not exist"}}},
			want: want{refused: map[string]string{"mine": infrav1.CredentialsSecretNotFoundReason}, msg: map[string]string{"mine": "Secret s does not exist"}},
		},
		"UnreadNewIsNotJudgedYet": {
			reason: "a new config whose Secret was not read is not usable yet",
			own:    []OwnConfig{unreadMine()},
			want:   want{refused: map[string]string{"mine": infrav1.NotJudgedYetReason}, msg: map[string]string{"mine": "rationed"}},
		},
		"BrokenGrantGrantsNothing": {
			reason: "a grant whose selector cannot be read grants nothing and says why; the other grants and configs are judged",
			grants: []infrav1.ClusterProviderConfigGrant{brokenCPC, grantedCPC},
			own:    []OwnConfig{ownConfig(kubeProvider, "mine", secretSpec("s", "kubeconfig"), map[string]map[string][]byte{"s": {"kubeconfig": []byte(staticKubeconfig)}})},
			want: want{
				configs: []string{"kubernetes.m.crossplane.io/ClusterProviderConfig/granted", "kubernetes.m.crossplane.io/ProviderConfig/mine"},
				refused: map[string]string{"shared": infrav1.InvalidGrantReason},
				msg:     map[string]string{"shared": "ClusterProviderConfigGrant broken cannot be read and grants nothing: spec.allowedNamespaces.selector"},
			},
		},
		"BrokenSourceGrantGrantsNothing": {
			reason: "a credential source grant that cannot be read grants nothing, and the refusal names it",
			grants: []infrav1.ClusterProviderConfigGrant{brokenSource},
			own:    []OwnConfig{ownConfig(awsProvider, "irsa", map[string]any{"credentials": map[string]any{"source": "IRSA"}}, nil)},
			want: want{
				refused: map[string]string{"irsa": infrav1.ProviderConfigNotGrantedReason},
				msg:     map[string]string{"irsa": "grants for it that cannot be read, which grant nothing: broken-source"},
			},
		},
		"UnreadableSecret": {
			reason: "a Secret that could not be read refuses its config alone, saying so",
			own: []OwnConfig{unreadable,
				ownConfig(kubeProvider, "mine", secretSpec("m", "kubeconfig"), map[string]map[string][]byte{"m": {"kubeconfig": []byte(staticKubeconfig)}})},
			want: want{
				configs: []string{"kubernetes.m.crossplane.io/ProviderConfig/mine"},
				refused: map[string]string{"unreadable": infrav1.CredentialsSecretUnreadableReason},
				msg:     map[string]string{"unreadable": "spec.credentials.secretRef: Secret team-a/s cannot be read (InternalError)"},
			},
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
			got, err := Usable(teamA(nil), tc.grants, []Provider{awsProvider, kubeProvider}, tc.own, false, tc.prev)
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

func TestLocks(t *testing.T) {
	pc := func(g, n string) infrav1.LockedObject {
		return infrav1.LockedObject{APIGroup: g, Kind: "ProviderConfig", Name: n}
	}
	secret := func(n string) infrav1.LockedObject { return infrav1.LockedObject{Kind: "Secret", Name: n} }
	cases := map[string]struct {
		c    OwnConfig
		want []infrav1.LockedObject
	}{
		"a kubeconfig's Secret decides the identity: locked with its config": {
			c:    ownConfig(kubeProvider, "mine", secretSpec("kc", "kubeconfig"), nil),
			want: []infrav1.LockedObject{pc("kubernetes.m.crossplane.io", "mine"), secret("kc")},
		},
		"an AWS Secret's static keys are its identity: rotated in place": {
			c:    ownConfig(awsProvider, "mine", secretSpec("keys", "credentials"), nil),
			want: []infrav1.LockedObject{pc("aws.m.upbound.io", "mine")},
		},
		"no Secret: the config alone": {
			c:    ownConfig(kubeProvider, "injected", map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}}, nil),
			want: []infrav1.LockedObject{pc("kubernetes.m.crossplane.io", "injected")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Locks(&tc.c)); diff != "" {
				t.Errorf("Locks (-want +got):\n%s", diff)
			}
		})
	}
	got := MergeLocks([]infrav1.LockedObject{secret("b"), pc("g", "a")}, []infrav1.LockedObject{secret("b"), secret("a")}, nil)
	if diff := cmp.Diff([]infrav1.LockedObject{pc("g", "a"), secret("a"), secret("b")}, got); diff != "" {
		t.Errorf("MergeLocks (-want +got):\n%s", diff)
	}
	if MergeLocks(nil, nil) != nil {
		t.Error("MergeLocks of nothing is not nil")
	}
}

func TestAdmits(t *testing.T) {
	spec := &infrav1.NamespaceCredentialsSpec{Configs: []infrav1.UsableConfig{
		{APIGroup: "g", Kind: infrav1.ProviderConfigKindNamespaced, Name: "mine"},
		{APIGroup: "g", Kind: infrav1.ProviderConfigKindCluster, Name: "default"},
	}}
	all := &infrav1.NamespaceCredentialsSpec{AllClusterConfigs: true}
	cases := map[string]struct {
		spec              *infrav1.NamespaceCredentialsSpec
		group, kind, name string
		want              bool
	}{
		"listed own config":                                 {spec, "g", "ProviderConfig", "mine", true},
		"same name, other group":                            {spec, "h", "ProviderConfig", "mine", false},
		"same name, other kind":                             {spec, "g", "ClusterProviderConfig", "mine", false},
		"unset reference is ClusterProviderConfig default":  {spec, "g", "", "", true},
		"unset name is default":                             {spec, "g", "ClusterProviderConfig", "", true},
		"unset reference, nothing granted":                  {&infrav1.NamespaceCredentialsSpec{}, "g", "", "", false},
		"every ClusterProviderConfig":                       {all, "g", "ClusterProviderConfig", "any", true},
		"every ClusterProviderConfig, not a ProviderConfig": {all, "g", "ProviderConfig", "any", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Admits(tc.spec, tc.group, tc.kind, tc.name); got != tc.want {
				t.Errorf("Admits = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRevocation(t *testing.T) {
	const (
		paused  = infrav1.CrossplanePausedAnnotation
		revoked = infrav1.CredentialsRevokedLabel
		hold    = infrav1.CredentialsHoldAnnotation
	)
	cases := map[string]struct {
		annotations map[string]string
		admitted    bool
		set         map[string]string
		remove      []string
	}{
		"admitted and unmarked: untouched": {annotations: nil, admitted: true},
		"revoked, running: paused and marked": {annotations: nil, admitted: false,
			set: map[string]string{paused: "true", revoked: infrav1.CredentialsRevokedPaused}},
		"revoked, paused by someone else: marked kept": {annotations: map[string]string{paused: "true"}, admitted: false,
			set: map[string]string{revoked: infrav1.CredentialsRevokedKept}},
		"revoked, held by its XR's hold: marked, the pause the bridge's": {annotations: map[string]string{paused: "true", hold: "true"}, admitted: false,
			set: map[string]string{revoked: infrav1.CredentialsRevokedPaused}},
		"revoked, marked, resumed by someone: paused again": {annotations: map[string]string{revoked: infrav1.CredentialsRevokedKept}, admitted: false,
			set: map[string]string{paused: "true", revoked: infrav1.CredentialsRevokedPaused}},
		"revoked, marked and paused: untouched": {annotations: map[string]string{paused: "true", revoked: infrav1.CredentialsRevokedPaused}, admitted: false},
		"granted again: resumed": {annotations: map[string]string{paused: "true", revoked: infrav1.CredentialsRevokedPaused}, admitted: true,
			remove: []string{revoked, paused}},
		"granted again, its XR's hold remains: only unmarked": {annotations: map[string]string{paused: "true", revoked: infrav1.CredentialsRevokedPaused, hold: "true"}, admitted: true,
			remove: []string{revoked}},
		"granted again, someone else's pause: only unmarked": {annotations: map[string]string{paused: "true", revoked: infrav1.CredentialsRevokedKept}, admitted: true,
			remove: []string{revoked}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			set, remove := Revocation(tc.annotations, tc.admitted)
			if diff := cmp.Diff(tc.set, set); diff != "" {
				t.Errorf("set (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.remove, remove); diff != "" {
				t.Errorf("remove (-want +got):\n%s", diff)
			}
		})
	}
}

// unreadMine is the namespace's config "mine" on Secret s, not read.
func unreadMine() OwnConfig {
	c := ownConfig(kubeProvider, "mine", secretSpec("s", "kubeconfig"), nil)
	c.Unread = true
	return c
}

// A tenant cannot grow its record past what the API server stores: the
// configs it lists and the refusals it explains are bounded.
func TestUsableIsBounded(t *testing.T) {
	var own []OwnConfig
	for i := range MaxOwnConfigs + 300 {
		name := fmt.Sprintf("c%04d", i)
		own = append(own, ownConfig(kubeProvider, name, secretSpec(name, "k"), map[string]map[string][]byte{name: {"k": []byte(staticKubeconfig)}}))
	}
	for i := range 2 * MaxRefused {
		own = append(own, ownConfig(kubeProvider, fmt.Sprintf("x%04d", i), map[string]any{}, nil))
	}
	got, err := Usable(teamA(nil), nil, []Provider{kubeProvider}, own, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Configs) != MaxOwnConfigs || got.Configs[MaxOwnConfigs-1].Name != fmt.Sprintf("c%04d", MaxOwnConfigs-1) {
		t.Errorf("listed %d configs, want the first %d by name", len(got.Configs), MaxOwnConfigs)
	}
	if len(got.Refused) != MaxRefused || got.Refused[0].Reason != infrav1.TooManyProviderConfigsReason {
		t.Errorf("refused %d (first %+v), want %d, the configs past the limit first", len(got.Refused), got.Refused[0], MaxRefused)
	}
	if len(got.Locked) != 2*MaxOwnConfigs {
		t.Errorf("locked %d, want each listed config and its Secret", len(got.Locked))
	}
}

func TestInvalidSecretRef(t *testing.T) {
	cases := map[string]struct {
		reason, namespace, name string
		// want is a substring of the reason; "" when valid.
		want string
	}{
		"Valid":        {reason: "a DNS subdomain in a DNS label namespace is looked up", namespace: "team-a", name: "creds.v1", want: ""},
		"Empty":        {reason: "no name is no Secret", namespace: "team-a", want: "names no Secret"},
		"Slash":        {reason: "a slash would be a path on the API server", namespace: "team-a", name: "a/b", want: `"a/b" is not a valid Secret name`},
		"DotDot":       {reason: "a path segment is not a name", namespace: "team-a", name: "..", want: "is not a valid Secret name"},
		"Upper":        {reason: "names are lower case", namespace: "team-a", name: "Creds", want: "is not a valid Secret name"},
		"Long":         {reason: "a name is at most 253 characters", namespace: "team-a", name: strings.Repeat("a", 254), want: "is not a valid Secret name"},
		"BadNamespace": {reason: "a namespace must be a DNS label", namespace: "a.b", name: "creds", want: "is not a valid namespace name"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := InvalidSecretRef(tc.namespace, tc.name)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("%s\nInvalidSecretRef(%q, %q): %q, want %q", tc.reason, tc.namespace, tc.name, got, tc.want)
			}
		})
	}
}

func TestWithGrants(t *testing.T) {
	own := infrav1.UsableConfig{APIGroup: "kubernetes.m.crossplane.io", Kind: infrav1.ProviderConfigKindNamespaced, Name: "mine"}
	revoked := infrav1.UsableConfig{APIGroup: "kubernetes.m.crossplane.io", Kind: infrav1.ProviderConfigKindCluster, Name: "revoked"}
	granted := infrav1.UsableConfig{APIGroup: "kubernetes.m.crossplane.io", Kind: infrav1.ProviderConfigKindCluster, Name: "granted"}
	lock := infrav1.LockedObject{APIGroup: "kubernetes.m.crossplane.io", Kind: "ProviderConfig", Name: "mine"}
	refusedOwn := infrav1.RefusedConfig{UsableConfig: infrav1.UsableConfig{APIGroup: "kubernetes.m.crossplane.io", Kind: infrav1.ProviderConfigKindNamespaced, Name: "exec"}, Reason: infrav1.SharedIdentityInSecretReason}
	prev := &infrav1.NamespaceCredentialsSpec{Configs: []infrav1.UsableConfig{revoked, own}, Locked: []infrav1.LockedObject{lock}, Refused: []infrav1.RefusedConfig{refusedOwn}}
	grants := []infrav1.ClusterProviderConfigGrant{grant("g", infrav1.ClusterProviderConfigReference{APIGroup: "kubernetes.m.crossplane.io", Name: "granted"}, infrav1.AllowedNamespaces{Names: []string{"team-a"}})}
	cases := map[string]struct {
		reason string
		prev   *infrav1.NamespaceCredentialsSpec
		want   infrav1.NamespaceCredentialsSpec
	}{
		"NoRecord": {
			reason: "a namespace without a record gets what the grants give it",
			want:   infrav1.NamespaceCredentialsSpec{Configs: []infrav1.UsableConfig{granted}},
		},
		"RevokedAndGranted": {
			reason: "a revoked shared config goes and a granted one comes, whatever becomes of judging the namespace's own configs, which stay as judged",
			prev:   prev,
			want:   infrav1.NamespaceCredentialsSpec{Configs: []infrav1.UsableConfig{granted, own}, Locked: []infrav1.LockedObject{lock}, Refused: []infrav1.RefusedConfig{refusedOwn}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := WithGrants(teamA(nil), grants, []Provider{kubeProvider}, false, tc.prev)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nWithGrants(...): -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
