package resolve

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
)

// A Secret found to exist is trusted for credentials.RecheckSecretAfter, one found
// missing for RecheckMissingSecretAfter: an XR that uses it is reconciled
// many times, and many XRs may name it; each would read it again.
func TestSecretIsReadAgainOnlyAfterTheRecheckInterval(t *testing.T) {
	cfg := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"credentials": map[string]any{
		"source": "Secret", "secretRef": map[string]any{"name": "creds", "key": "credentials"},
	}}}}
	ref := &infrav1.ProviderConfigReference{Kind: infrav1.ProviderConfigKindNamespaced, Name: "team-a"}
	cases := map[string]struct {
		exists bool
		// after is how long after the first check the second one runs.
		after     time.Duration
		wantReads int
		wantOK    bool
	}{
		"FoundThenWithinTheInterval":   {exists: true, after: credentials.RecheckSecretAfter - time.Second, wantReads: 1, wantOK: true},
		"FoundThenAfterTheInterval":    {exists: true, after: credentials.RecheckSecretAfter, wantReads: 2, wantOK: true},
		"MissingThenWithinItsInterval": {exists: false, after: RecheckMissingSecretAfter - time.Second, wantReads: 1, wantOK: false},
		"MissingThenAfterItsInterval":  {exists: false, after: RecheckMissingSecretAfter, wantReads: 2, wantOK: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var objs []client.Object
			if tc.exists {
				objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "creds"}})
			}
			reads := 0
			c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					reads++
					return c.Get(ctx, key, obj, opts...)
				},
			}).Build()
			now := time.Now()
			r := NewAPIResolver(c, c)
			r.now = func() time.Time { return now }
			for range 2 {
				_, ok, err := r.secret(t.Context(), config{ref: ref, obj: fieldpath.Pave(cfg.Object), namespace: "team-a"}, "spec.credentials")
				if err != nil {
					t.Fatal(err)
				}
				if ok != tc.wantOK {
					t.Errorf("secret() ok = %v, want %v", ok, tc.wantOK)
				}
				now = now.Add(tc.after)
			}
			if reads != tc.wantReads {
				t.Errorf("Secret reads = %d, want %d", reads, tc.wantReads)
			}
		})
	}
}

// Group versions of the credentials kinds of TestResolve: a v2 provider's
// namespaced ProviderConfig and ClusterProviderConfig, and a legacy
// provider's cluster-scoped ProviderConfig.
var (
	modern = schema.GroupVersion{Group: "aws.m.upbound.io", Version: "v1beta1"}
	legacy = schema.GroupVersion{Group: "aws.upbound.io", Version: "v1beta1"}
)

func credentialsConfig(gv schema.GroupVersion, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gv.WithKind(kind))
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func fromSecret(name, ns string) map[string]any {
	ref := map[string]any{"name": name, "key": "credentials"}
	if ns != "" {
		ref["namespace"] = ns
	}
	return map[string]any{"source": "Secret", "secretRef": ref}
}

// What a namespace owns is a namespaced ProviderConfig whose credentials
// come from a Secret of its own; anything else is shared and needs a grant:
// a cluster-scoped config of any kind name, and every ambient identity.
func TestResolve(t *testing.T) {
	inTeamA := infrav1.AllowedNamespaces{Names: []string{"team-a"}}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "creds"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "shared-creds"}},
		credentialsConfig(modern, "ProviderConfig", "team-a", "own", map[string]any{"credentials": fromSecret("creds", "")}),
		credentialsConfig(modern, "ProviderConfig", "team-a", "injected", map[string]any{"credentials": map[string]any{"source": "InjectedIdentity"}}),
		credentialsConfig(modern, "ProviderConfig", "team-a", "irsa", map[string]any{"credentials": map[string]any{"source": "IRSA"}}),
		credentialsConfig(modern, "ProviderConfig", "team-a", "nosource", map[string]any{}),
		credentialsConfig(modern, "ProviderConfig", "team-a", "slash", map[string]any{"credentials": fromSecret("a/b", "")}),
		credentialsConfig(modern, "ProviderConfig", "team-a", "identity", map[string]any{"credentials": fromSecret("creds", ""), "identity": map[string]any{"type": "GoogleApplicationCredentials", "source": "InjectedIdentity"}}),
		credentialsConfig(modern, "ClusterProviderConfig", "", "shared", map[string]any{"credentials": fromSecret("shared-creds", "platform")}),
		credentialsConfig(modern, "ClusterProviderConfig", "", "nsless", map[string]any{"credentials": fromSecret("shared-creds", "")}),
		credentialsConfig(legacy, "ProviderConfig", "", "legacy", map[string]any{"credentials": fromSecret("shared-creds", "platform")}),
	}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{modern, legacy})
	mapper.Add(modern.WithKind("ProviderConfig"), meta.RESTScopeNamespace)
	mapper.Add(modern.WithKind("ClusterProviderConfig"), meta.RESTScopeRoot)
	mapper.Add(legacy.WithKind("ProviderConfig"), meta.RESTScopeRoot)

	ref := func(group string, kind infrav1.ProviderConfigKind, name string) *infrav1.ProviderConfigReference {
		return &infrav1.ProviderConfigReference{APIGroup: group, Kind: kind, Name: name}
	}
	type want struct {
		ready   bool
		reason  string
		message string
	}
	cases := map[string]struct {
		reason string
		ref    *infrav1.ProviderConfigReference
		grants []infrav1.ClusterProviderConfigGrant
		// mayNotRead are the verbs the bridge lacks on the config's kind.
		mayNotRead []string
		want       want
	}{
		"InvalidSecretName": {
			reason: "a Secret name the API server cannot look up is a verdict on the config, not an error, and no request",
			ref:    ref(modern.Group, "ProviderConfig", "slash"),
			want:   want{reason: infrav1.CredentialsSecretUnreadableReason, message: `ProviderConfig slash spec.credentials.secretRef: "a/b" is not a valid Secret name: ` + strings.Join(validation.IsDNS1123Subdomain("a/b"), "; ")},
		},
		"OwnSecret": {
			reason: "a namespaced config with a Secret of the namespace is the namespace's own",
			ref:    ref(modern.Group, "ProviderConfig", "own"),
			want:   want{ready: true, reason: infrav1.CredentialsReadyReason, message: "ProviderConfig aws.m.upbound.io/own in namespace team-a may be used"},
		},
		"InjectedIdentityUngranted": {
			reason: "the provider's own identity is shared by every namespace",
			ref:    ref(modern.Group, "ProviderConfig", "injected"),
			want: want{reason: infrav1.ProviderConfigNotGrantedReason, message: "spec.providerConfigRef: ProviderConfig injected in namespace team-a uses spec.credentials.source InjectedIdentity, an identity every namespace shares: " +
				"namespace team-a may not use credentials source InjectedIdentity of aws.m.upbound.io: no ClusterProviderConfigGrant allows it; a ClusterProviderConfigGrant with credentialSource aws.m.upbound.io/InjectedIdentity covering namespace team-a is missing"},
		},
		"IRSAGranted": {
			reason: "an ambient source granted to the namespace may be used",
			ref:    ref(modern.Group, "ProviderConfig", "irsa"),
			grants: []infrav1.ClusterProviderConfigGrant{sourceGrant("irsa", infrav1.CredentialSourceReference{APIGroup: modern.Group, Source: "IRSA"}, inTeamA)},
			want:   want{ready: true, reason: infrav1.CredentialsReadyReason, message: "ProviderConfig aws.m.upbound.io/irsa in namespace team-a may be used"},
		},
		"IRSAGrantedToAnotherProvider": {
			reason: "a source granted for another provider's group does not cover this one",
			ref:    ref(modern.Group, "ProviderConfig", "irsa"),
			grants: []infrav1.ClusterProviderConfigGrant{sourceGrant("irsa", infrav1.CredentialSourceReference{APIGroup: legacy.Group, Source: "IRSA"}, inTeamA)},
			want: want{reason: infrav1.ProviderConfigNotGrantedReason, message: "spec.providerConfigRef: ProviderConfig irsa in namespace team-a uses spec.credentials.source IRSA, an identity every namespace shares: " +
				"namespace team-a may not use credentials source IRSA of aws.m.upbound.io: no ClusterProviderConfigGrant allows it; a ClusterProviderConfigGrant with credentialSource aws.m.upbound.io/IRSA covering namespace team-a is missing"},
		},
		"NoSource": {
			reason: "a config that says nothing of its source is not known to be the namespace's own",
			ref:    ref(modern.Group, "ProviderConfig", "nosource"),
			want: want{reason: infrav1.ProviderConfigNotGrantedReason,
				message: "spec.providerConfigRef: ProviderConfig nosource spec.credentials.source is not set: only credentials from a Secret of namespace team-a are the namespace's own"},
		},
		"AmbientIdentityBlock": {
			reason: "an ambient identity in spec.identity is shared as well",
			ref:    ref(modern.Group, "ProviderConfig", "identity"),
			want: want{reason: infrav1.ProviderConfigNotGrantedReason, message: "spec.providerConfigRef: ProviderConfig identity in namespace team-a uses spec.identity.source InjectedIdentity, an identity every namespace shares: " +
				"namespace team-a may not use credentials source InjectedIdentity of aws.m.upbound.io: no ClusterProviderConfigGrant allows it; a ClusterProviderConfigGrant with credentialSource aws.m.upbound.io/InjectedIdentity covering namespace team-a is missing"},
		},
		"ClusterProviderConfigUngranted": {
			reason: "a ClusterProviderConfig needs a grant",
			ref:    ref(modern.Group, "ClusterProviderConfig", "shared"),
			want: want{reason: infrav1.ProviderConfigNotGrantedReason, message: "spec.providerConfigRef: namespace team-a may not use ClusterProviderConfig aws.m.upbound.io/shared: no ClusterProviderConfigGrant allows it; " +
				"a ClusterProviderConfigGrant with providerConfigRef aws.m.upbound.io/shared covering namespace team-a is missing"},
		},
		"LegacyClusterScopedProviderConfigUngranted": {
			reason: "a legacy provider's ProviderConfig is cluster-scoped, hence shared, whatever its kind is called",
			ref:    ref(legacy.Group, "ProviderConfig", "legacy"),
			want: want{reason: infrav1.ProviderConfigNotGrantedReason, message: "spec.providerConfigRef: namespace team-a may not use ProviderConfig aws.upbound.io/legacy: no ClusterProviderConfigGrant allows it; " +
				"a ClusterProviderConfigGrant with providerConfigRef aws.upbound.io/legacy covering namespace team-a is missing"},
		},
		"LegacyClusterScopedProviderConfigGranted": {
			reason: "a grant of the legacy config's group and name covers it",
			ref:    ref(legacy.Group, "ProviderConfig", "legacy"),
			grants: []infrav1.ClusterProviderConfigGrant{grant("legacy", infrav1.ClusterProviderConfigReference{APIGroup: legacy.Group, Name: "legacy"}, inTeamA)},
			want:   want{ready: true, reason: infrav1.CredentialsReadyReason, message: "ProviderConfig aws.upbound.io/legacy may be used"},
		},
		"SharedSecretWithoutNamespace": {
			reason: "a shared config's Secret is never looked up in the XR's namespace",
			ref:    ref(modern.Group, "ClusterProviderConfig", "nsless"),
			grants: []infrav1.ClusterProviderConfigGrant{grant("nsless", infrav1.ClusterProviderConfigReference{APIGroup: modern.Group, Name: "nsless"}, inTeamA)},
			want: want{reason: infrav1.CredentialsSecretNotFoundReason,
				message: "ClusterProviderConfig nsless spec.credentials.secretRef names no namespace: a cluster-scoped config's Secret must name its namespace"},
		},
		"UngrantedSharedConfigIsNotRead": {
			reason: "whether a namespace may use a shared config needs no read of it, so an ungranted one is refused even where it cannot be read",
			ref:    ref(modern.Group, "ClusterProviderConfig", "absent"),
			want: want{reason: infrav1.ProviderConfigNotGrantedReason, message: "spec.providerConfigRef: namespace team-a may not use ClusterProviderConfig aws.m.upbound.io/absent: no ClusterProviderConfigGrant allows it; " +
				"a ClusterProviderConfigGrant with providerConfigRef aws.m.upbound.io/absent covering namespace team-a is missing"},
		},
		"UnreadableKind": {
			reason:     "a kind the bridge may not list is reported, never read (a cached read would wait for an informer that never syncs)",
			ref:        ref(legacy.Group, "ProviderConfig", "legacy"),
			grants:     []infrav1.ClusterProviderConfigGrant{grant("legacy", infrav1.ClusterProviderConfigReference{APIGroup: legacy.Group, Name: "legacy"}, inTeamA)},
			mayNotRead: []string{"list providerconfigs.aws.upbound.io", "watch providerconfigs.aws.upbound.io"},
			want: want{reason: infrav1.ForbiddenReason, message: "spec.providerConfigRef: the bridge may not list providerconfigs.aws.upbound.io, watch providerconfigs.aws.upbound.io, " +
				"so it cannot check ProviderConfig aws.upbound.io/legacy: grant it with a ClusterRole labelled capxp.dev/aggregate-to-manager: \"true\", which the manager's role aggregates (or use a provider whose credentials kinds it may read)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			all := append([]client.Object{}, objs...)
			for i := range tc.grants {
				all = append(all, &tc.grants[i])
			}
			s := runtime.NewScheme()
			_ = clientgoscheme.AddToScheme(s)
			_ = infrav1.AddToScheme(s)
			c := fake.NewClientBuilder().WithScheme(s).WithRESTMapper(mapper).WithObjects(all...).Build()
			check := WithReadCheck(func(context.Context, schema.GroupResource) ([]string, error) { return tc.mayNotRead, nil })
			res, err := NewAPIResolver(c, c, check).Resolve(t.Context(), "team-a", tc.ref)
			if err != nil {
				t.Fatalf("%s\nResolve(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, want{ready: res.Ready, reason: res.Reason, message: res.Message}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nResolve(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func grant(name string, ref infrav1.ClusterProviderConfigReference, a infrav1.AllowedNamespaces) infrav1.ClusterProviderConfigGrant {
	return infrav1.ClusterProviderConfigGrant{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: infrav1.ClusterProviderConfigGrantSpec{ProviderConfigRef: &ref, AllowedNamespaces: a}}
}

func sourceGrant(name string, src infrav1.CredentialSourceReference, a infrav1.AllowedNamespaces) infrav1.ClusterProviderConfigGrant {
	return infrav1.ClusterProviderConfigGrant{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: infrav1.ClusterProviderConfigGrantSpec{CredentialSource: &src, AllowedNamespaces: a}}
}
