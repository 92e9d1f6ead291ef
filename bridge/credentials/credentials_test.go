package credentials

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

var shared = infrav1.ClusterProviderConfigReference{APIGroup: "aws.m.upbound.io", Name: "shared"}

func grant(name string, ref infrav1.ClusterProviderConfigReference, a infrav1.AllowedNamespaces) infrav1.ClusterProviderConfigGrant {
	return infrav1.ClusterProviderConfigGrant{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: infrav1.ClusterProviderConfigGrantSpec{ProviderConfigRef: &ref, AllowedNamespaces: a}}
}

func sourceGrant(name string, src infrav1.CredentialSourceReference, a infrav1.AllowedNamespaces) infrav1.ClusterProviderConfigGrant {
	return infrav1.ClusterProviderConfigGrant{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: infrav1.ClusterProviderConfigGrantSpec{CredentialSource: &src, AllowedNamespaces: a}}
}

func teamA(labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: labels}}
}

func TestGranted(t *testing.T) {
	type want struct {
		// grant is the grant that allows it, the first by name.
		grant string
		msg   string
	}
	cases := map[string]struct {
		reason string
		grants []infrav1.ClusterProviderConfigGrant
		ns     *corev1.Namespace
		// asked is what is asked for; the shared config when empty.
		asked Shared
		want  want
	}{
		"NoGrant": {
			reason: "shared credentials are denied until granted",
			ns:     teamA(nil),
			want:   want{msg: "namespace team-a may not use ClusterProviderConfig aws.m.upbound.io/shared: no ClusterProviderConfigGrant allows it; a ClusterProviderConfigGrant with providerConfigRef aws.m.upbound.io/shared covering namespace team-a is missing"},
		},
		"ByName": {
			reason: "a namespace listed by name is granted",
			grants: []infrav1.ClusterProviderConfigGrant{grant("g", shared, infrav1.AllowedNamespaces{Names: []string{"team-b", "team-a"}})},
			ns:     teamA(nil),
			want:   want{grant: "g"},
		},
		"BySelector": {
			reason: "a namespace whose labels match is granted",
			grants: []infrav1.ClusterProviderConfigGrant{grant("g", shared, infrav1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}})},
			ns:     teamA(map[string]string{"tier": "gold"}),
			want:   want{grant: "g"},
		},
		"EmptySelectorGrantsNothing": {
			reason: "an empty selector matches no namespace, unlike elsewhere in Kubernetes",
			grants: []infrav1.ClusterProviderConfigGrant{grant("everyone?", shared, infrav1.AllowedNamespaces{Selector: &metav1.LabelSelector{}})},
			ns:     teamA(map[string]string{"tier": "gold"}),
			want:   want{msg: "namespace team-a may not use ClusterProviderConfig aws.m.upbound.io/shared: no ClusterProviderConfigGrant allows it (grants for it that do not cover team-a: everyone?); a ClusterProviderConfigGrant with providerConfigRef aws.m.upbound.io/shared covering namespace team-a is missing"},
		},
		"EveryNamespaceOnPurpose": {
			reason: "every namespace can be granted with an explicit expression",
			grants: []infrav1.ClusterProviderConfigGrant{grant("all", shared, infrav1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpExists}}}})},
			ns:     teamA(map[string]string{"kubernetes.io/metadata.name": "team-a"}),
			want:   want{grant: "all"},
		},
		"GrantsAddUp": {
			reason: "several grants for one config add up",
			grants: []infrav1.ClusterProviderConfigGrant{
				grant("b", shared, infrav1.AllowedNamespaces{Names: []string{"team-b"}}),
				grant("a", shared, infrav1.AllowedNamespaces{Names: []string{"team-a"}}),
			},
			ns:   teamA(nil),
			want: want{grant: "a"},
		},
		"FirstByName": {
			reason: "of several grants that cover the namespace, the first by name is named",
			grants: []infrav1.ClusterProviderConfigGrant{
				grant("zeta", shared, infrav1.AllowedNamespaces{Names: []string{"team-a"}}),
				grant("alpha", shared, infrav1.AllowedNamespaces{Names: []string{"team-a"}}),
			},
			ns:   teamA(nil),
			want: want{grant: "alpha"},
		},
		"GrantForAnotherConfig": {
			reason: "a grant covers only the config it names",
			grants: []infrav1.ClusterProviderConfigGrant{
				grant("other", infrav1.ClusterProviderConfigReference{APIGroup: "aws.m.upbound.io", Name: "prod"}, infrav1.AllowedNamespaces{Names: []string{"team-a"}}),
				grant("same-name-other-provider", infrav1.ClusterProviderConfigReference{APIGroup: "gcp.m.upbound.io", Name: "shared"}, infrav1.AllowedNamespaces{Names: []string{"team-a"}}),
			},
			ns:   teamA(nil),
			want: want{msg: "namespace team-a may not use ClusterProviderConfig aws.m.upbound.io/shared: no ClusterProviderConfigGrant allows it; a ClusterProviderConfigGrant with providerConfigRef aws.m.upbound.io/shared covering namespace team-a is missing"},
		},
		"AmbientSourceGranted": {
			reason: "a grant of an ambient source covers that provider's source",
			grants: []infrav1.ClusterProviderConfigGrant{sourceGrant("irsa", infrav1.CredentialSourceReference{APIGroup: "aws.m.upbound.io", Source: "IRSA"}, infrav1.AllowedNamespaces{Names: []string{"team-a"}})},
			ns:     teamA(nil),
			asked:  Ambient("aws.m.upbound.io", "IRSA"),
			want:   want{grant: "irsa"},
		},
		"AmbientSourceNotGranted": {
			reason: "a grant of a config, of another source or of another provider's source grants no ambient source",
			grants: []infrav1.ClusterProviderConfigGrant{
				grant("config", infrav1.ClusterProviderConfigReference{APIGroup: "aws.m.upbound.io", Name: "InjectedIdentity"}, infrav1.AllowedNamespaces{Names: []string{"team-a"}}),
				sourceGrant("irsa", infrav1.CredentialSourceReference{APIGroup: "aws.m.upbound.io", Source: "IRSA"}, infrav1.AllowedNamespaces{Names: []string{"team-a"}}),
				sourceGrant("other-provider", infrav1.CredentialSourceReference{APIGroup: "gcp.m.upbound.io", Source: "InjectedIdentity"}, infrav1.AllowedNamespaces{Names: []string{"team-a"}}),
			},
			ns:    teamA(nil),
			asked: Ambient("aws.m.upbound.io", "InjectedIdentity"),
			want:  want{msg: "namespace team-a may not use credentials source InjectedIdentity of aws.m.upbound.io: no ClusterProviderConfigGrant allows it; a ClusterProviderConfigGrant with credentialSource aws.m.upbound.io/InjectedIdentity covering namespace team-a is missing"},
		},
		"SourceGrantIsNoConfigGrant": {
			reason: "a grant of an ambient source does not grant a config of the same name",
			grants: []infrav1.ClusterProviderConfigGrant{sourceGrant("src", infrav1.CredentialSourceReference{APIGroup: "aws.m.upbound.io", Source: "shared"}, infrav1.AllowedNamespaces{Names: []string{"team-a"}})},
			ns:     teamA(nil),
			want:   want{msg: "namespace team-a may not use ClusterProviderConfig aws.m.upbound.io/shared: no ClusterProviderConfigGrant allows it; a ClusterProviderConfigGrant with providerConfigRef aws.m.upbound.io/shared covering namespace team-a is missing"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			asked := tc.asked
			if asked == (Shared{}) {
				asked = Config(shared.APIGroup, "ClusterProviderConfig", shared.Name)
			}
			grant, msg, err := GrantedBy(tc.grants, asked, tc.ns)
			if err != nil {
				t.Fatalf("%s\nGrantedBy(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, want{grant: grant, msg: msg}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nGrantedBy(...): -want, +got:\n%s", tc.reason, diff)
			}
			if ok, okMsg, _ := Granted(tc.grants, asked, tc.ns); ok != (grant != "") || okMsg != msg {
				t.Errorf("%s\nGranted(...) = %t, %q; GrantedBy(...) = %q, %q", tc.reason, ok, okMsg, grant, msg)
			}
		})
	}
}
