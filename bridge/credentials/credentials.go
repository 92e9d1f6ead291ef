// Package credentials decides whether a composite resource may use the
// Crossplane credentials its spec.providerConfigRef names. A namespace owns
// only a namespaced ProviderConfig, looked up in the XR's own namespace,
// whose credentials come from a Secret of that namespace. Everything else is
// shared and needs a ClusterProviderConfigGrant covering the namespace: a
// ClusterProviderConfig or a provider's legacy cluster-scoped ProviderConfig,
// and an ambient identity (InjectedIdentity, IRSA, ...) named by a
// namespaced ProviderConfig. The credentials secret must exist.
package credentials

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

// Shared is credentials a namespace does not own: a cluster-scoped
// credentials config (Name set), or a provider's ambient identity (Source
// set), of the provider whose credentials kinds are in APIGroup. A grant
// names a config by group and name: Kind (ClusterProviderConfig, or a legacy
// provider's cluster-scoped ProviderConfig) only names it in messages.
type Shared struct {
	APIGroup string
	Kind     string
	Name     string
	Source   string
}

// Config is the shared cluster-scoped credentials config group/name of a
// kind.
func Config(group, kind, name string) Shared { return Shared{APIGroup: group, Kind: kind, Name: name} }

// Ambient is the ambient identity source of the provider of group.
func Ambient(group, source string) Shared { return Shared{APIGroup: group, Source: source} }

// String names the shared credentials as a refusal does.
func (s Shared) String() string {
	if s.Source != "" {
		return fmt.Sprintf("credentials source %s of %s", s.Source, s.APIGroup)
	}
	kind := s.Kind
	if kind == "" {
		kind = string(infrav1.ProviderConfigKindCluster)
	}
	return fmt.Sprintf("%s %s/%s", kind, s.APIGroup, s.Name)
}

// grantField is the grant field that grants s, as a refusal names it.
func (s Shared) grantField() string {
	if s.Source != "" {
		return fmt.Sprintf("credentialSource %s/%s", s.APIGroup, s.Source)
	}
	return fmt.Sprintf("providerConfigRef %s/%s", s.APIGroup, s.Name)
}

// grants reports whether a grant's spec names s.
func grants(spec *infrav1.ClusterProviderConfigGrantSpec, s Shared) bool {
	if s.Source != "" {
		return spec.CredentialSource != nil && *spec.CredentialSource == infrav1.CredentialSourceReference{APIGroup: s.APIGroup, Source: s.Source}
	}
	return spec.ProviderConfigRef != nil && *spec.ProviderConfigRef == infrav1.ClusterProviderConfigReference{APIGroup: s.APIGroup, Name: s.Name}
}

// Granted reports whether any grant lets the namespace use the shared
// credentials; when none does, its message names the grant that is missing
// and the grants for those credentials that do not cover the namespace.
// Grants for the same credentials add up. An empty selector matches
// nothing.
func Granted(list []infrav1.ClusterProviderConfigGrant, s Shared, ns *corev1.Namespace) (bool, string, error) {
	covering, msg := coveringGrants(list, s, ns)
	return len(covering) > 0, msg, nil
}

// GrantedBy is Granted that names the grant that lets the namespace use the
// shared credentials, the first by name; "" and why when none does.
func GrantedBy(list []infrav1.ClusterProviderConfigGrant, s Shared, ns *corev1.Namespace) (string, string, error) {
	covering, msg := coveringGrants(list, s, ns)
	if len(covering) == 0 {
		return "", msg, nil
	}
	return slices.Min(covering), "", nil
}

// coveringGrants returns the names of the grants for the shared credentials that
// cover the namespace; when there are none, why.
func coveringGrants(list []infrav1.ClusterProviderConfigGrant, s Shared, ns *corev1.Namespace) ([]string, string) {
	var others, covering, broken []string
	for i := range list {
		g := &list[i]
		if !grants(&g.Spec, s) {
			continue
		}
		ok, err := covers(g.Spec.AllowedNamespaces, ns)
		if err != nil {
			// A grant that cannot be read grants nothing, and says why.
			broken = append(broken, fmt.Sprintf("%s (%v)", g.Name, err))
			continue
		}
		if ok {
			covering = append(covering, g.Name)
			continue
		}
		others = append(others, g.Name)
	}
	if len(covering) > 0 {
		return covering, ""
	}
	sort.Strings(others)
	msg := fmt.Sprintf("namespace %s may not use %s: no ClusterProviderConfigGrant allows it", ns.Name, s)
	if len(others) > 0 {
		msg += fmt.Sprintf(" (grants for it that do not cover %s: %s)", ns.Name, strings.Join(others, ", "))
	}
	if len(broken) > 0 {
		sort.Strings(broken)
		msg += fmt.Sprintf(" (grants for it that cannot be read, which grant nothing: %s)", strings.Join(broken, ", "))
	}
	msg += fmt.Sprintf("; a ClusterProviderConfigGrant with %s covering namespace %s is missing", s.grantField(), ns.Name)
	return nil, msg
}

func covers(a infrav1.AllowedNamespaces, ns *corev1.Namespace) (bool, error) {
	if slices.Contains(a.Names, ns.Name) {
		return true, nil
	}
	if a.Selector == nil || len(a.Selector.MatchLabels) == 0 && len(a.Selector.MatchExpressions) == 0 {
		return false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(a.Selector)
	if err != nil {
		return false, errors.Wrap(err, "spec.allowedNamespaces.selector")
	}
	return sel.Matches(labels.Set(ns.Labels)), nil
}

// RecheckSecretAfter is how long the bridge waits before looking for a
// missing credentials secret again, and how long it trusts that one it
// found still exists. The bridge does not watch Secrets, so that it needs no
// list or watch permission on them (least privilege); this is the one
// time-based wait of the credentials check, and it keeps the check from
// reading a Secret's metadata on every reconcile of every XR that uses it.
const RecheckSecretAfter = 30 * time.Second

// Resolver resolves an XR's credentials.
type Resolver interface {
	Resolve(ctx context.Context, namespace string, ref *infrav1.ProviderConfigReference) (verdict.Verdict, error)
}

// CredentialBlocks are the fields of a provider's credentials config that say
// where credentials come from: spec.credentials (every provider) and
// spec.identity (provider-kubernetes' identity to the API server it
// manages), each with a source and, for source Secret, a secretRef.
var CredentialBlocks = []string{"spec.credentials", "spec.identity"}

// SourceSecret is the one credentials source a namespace owns: a Secret.
const SourceSecret = "Secret"
