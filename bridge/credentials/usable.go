package credentials

// What a namespace's managed resources may name: the record the API server
// reads when it admits a managed resource.

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// Provider is a Crossplane provider whose managed resources are admitted
// only with credentials their namespace may use.
type Provider struct {
	// ConfigGroup is the group of its ProviderConfig and
	// ClusterProviderConfig kinds, for example aws.m.upbound.io.
	ConfigGroup string
	// ManagedGroup is the group of its managed resources; its subdomains
	// are too (ec2.aws.m.upbound.io for aws.m.upbound.io).
	ManagedGroup string
	// Secret is how it reads a credentials Secret.
	Secret SecretFormat
}

// Manages reports whether a managed resource of group is the provider's.
func (p Provider) Manages(group string) bool {
	return group == p.ManagedGroup || strings.HasSuffix(group, "."+p.ManagedGroup)
}

// DefaultProviders are the providers of the shipped Compositions.
var DefaultProviders = []Provider{
	{ConfigGroup: "aws.m.upbound.io", ManagedGroup: "aws.m.upbound.io", Secret: SecretAWS},
	{ConfigGroup: "kubernetes.m.crossplane.io", ManagedGroup: "kubernetes.m.crossplane.io", Secret: SecretKubeconfig},
}

// ParseProvider reads a provider as the manager's --credentials-provider flag
// gives it: CONFIG_GROUP[:MANAGED_GROUP:SECRET_FORMAT]. A shipped provider's
// config group alone stands for its default.
func ParseProvider(s string) (Provider, error) {
	parts := strings.Split(s, ":")
	switch len(parts) {
	case 1:
		for _, p := range DefaultProviders {
			if p.ConfigGroup == s {
				return p, nil
			}
		}
		return Provider{}, errors.Errorf("%q is not a shipped provider's group: give CONFIG_GROUP:MANAGED_GROUP:SECRET_FORMAT (format kubeconfig, aws or static)", s)
	case 3:
		p := Provider{ConfigGroup: parts[0], ManagedGroup: parts[1], Secret: SecretFormat(parts[2])}
		if p.ConfigGroup == "" || p.ManagedGroup == "" {
			return Provider{}, errors.Errorf("%q: groups must not be empty", s)
		}
		switch p.Secret {
		case SecretKubeconfig, SecretAWS, SecretStatic:
			return p, nil
		}
		return Provider{}, errors.Errorf("%q: secret format %q is none of kubeconfig, aws, static", s, p.Secret)
	}
	return Provider{}, errors.Errorf("%q: want CONFIG_GROUP or CONFIG_GROUP:MANAGED_GROUP:SECRET_FORMAT", s)
}

// OwnConfig is a namespaced ProviderConfig of the namespace, with the Secrets
// it names as the bridge read them.
type OwnConfig struct {
	Provider Provider
	Name     string
	// Spec is the config's spec, paved.
	Spec *fieldpath.Paved
	// Secrets are the namespace's Secrets the config names, by name; a
	// missing one is absent.
	Secrets map[string]map[string][]byte
	// Unread is true when the Secrets were not read: the previous record's
	// verdict stands (Carried), or the namespace's reads were spent.
	Unread bool
	// Unreadable says, by name, why a Secret the config names could not be
	// read: its name is invalid (InvalidSecretRef), or reading it failed.
	Unreadable map[string]string
}

// InvalidSecretRef says why a Secret reference cannot name a Secret the API
// server can look up; "" when it can. Checked before any request.
func InvalidSecretRef(namespace, name string) string {
	if name == "" {
		return "names no Secret"
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Sprintf("%q is not a valid Secret name: %s", truncate(name, 253), strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return fmt.Sprintf("%q is not a valid namespace name: %s", truncate(namespace, 63), strings.Join(errs, "; "))
	}
	return ""
}

// A record's size is bounded, whatever a tenant creates: the API server
// refuses an object over its limit, and a record that cannot be written
// cannot stop admitting what a revoked grant allowed.
const (
	// MaxOwnConfigs is how many of a namespace's own ProviderConfigs its
	// record lists at most (by name); the rest are refused.
	MaxOwnConfigs = 512
	// MaxRefused is how many refused configs the record says why of (by
	// name); the admission of the others says less.
	MaxRefused = 128
	// MaxNetworks is how many network IDs the record lists at most.
	MaxNetworks = 4096
)

// Carried reports whether the namespace's own config c keeps the verdict of
// the previous record without its Secrets being read: listed and locked
// there (the config, and each Secret whose contents decide), so nothing it
// was judged on can have changed.
func Carried(prev *infrav1.NamespaceCredentialsSpec, c *OwnConfig) bool {
	if prev == nil {
		return false
	}
	u := infrav1.UsableConfig{APIGroup: c.Provider.ConfigGroup, Kind: infrav1.ProviderConfigKindNamespaced, Name: c.Name}
	listed := false
	for _, l := range prev.Configs {
		if l == u {
			listed = true
			break
		}
	}
	return listed && Locked(prev, c)
}

// Locked reports whether the previous record holds every lock of the
// namespace's own config c: what it was judged on cannot change.
func Locked(prev *infrav1.NamespaceCredentialsSpec, c *OwnConfig) bool {
	if prev == nil {
		return false
	}
	held := map[infrav1.LockedObject]bool{}
	for _, l := range prev.Locked {
		held[l] = true
	}
	for _, l := range Locks(c) {
		if !held[l] {
			return false
		}
	}
	return true
}

// SecretsNamed returns the names of the Secrets of the namespace a config
// spec names in its credential blocks with source Secret.
func SecretsNamed(spec *fieldpath.Paved) []string {
	var names []string
	for _, b := range CredentialBlocks {
		if src, _ := spec.GetString(b + ".source"); src != SourceSecret {
			continue
		}
		if n, _ := spec.GetString(b + ".secretRef.name"); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// Usable computes what a namespace's managed resources may name: the
// ClusterProviderConfigs of the providers granted to it, and those of its own
// ProviderConfigs whose credentials are its own (a Secret of the namespace
// whose contents reach nothing else) or an ambient source granted to it.
// all grants every ClusterProviderConfig. The result is sorted.
func Usable(ns *corev1.Namespace, grants []infrav1.ClusterProviderConfigGrant, providers []Provider, own []OwnConfig, all bool, prev *infrav1.NamespaceCredentialsSpec) (infrav1.NamespaceCredentialsSpec, error) {
	out := infrav1.NamespaceCredentialsSpec{AllClusterConfigs: all}
	// broken says why the grants of a config that cannot be read grant
	// nothing: a verdict on the grant, never a stop for the namespace.
	broken := map[infrav1.UsableConfig][]string{}
	for _, p := range providers {
		for i := range grants {
			g := &grants[i]
			ref := g.Spec.ProviderConfigRef
			if ref == nil || ref.APIGroup != p.ConfigGroup {
				continue
			}
			u := infrav1.UsableConfig{APIGroup: p.ConfigGroup, Kind: infrav1.ProviderConfigKindCluster, Name: ref.Name}
			ok, err := covers(g.Spec.AllowedNamespaces, ns)
			if err != nil {
				broken[u] = append(broken[u], fmt.Sprintf("ClusterProviderConfigGrant %s cannot be read and grants nothing: %v", g.Name, err))
				continue
			}
			if ok {
				out.Configs = append(out.Configs, u)
			}
		}
	}
	for u, why := range broken {
		if !slices.Contains(out.Configs, u) && !all {
			sort.Strings(why)
			out.Refused = append(out.Refused, infrav1.RefusedConfig{UsableConfig: u, Reason: infrav1.InvalidGrantReason, Message: truncate(strings.Join(why, "; "), 1024)})
		}
	}
	own = slices.Clone(own)
	sort.SliceStable(own, func(i, j int) bool {
		return own[i].Provider.ConfigGroup+"/"+own[i].Name < own[j].Provider.ConfigGroup+"/"+own[j].Name
	})
	listed := 0
	for i := range own {
		c := &own[i]
		u := infrav1.UsableConfig{APIGroup: c.Provider.ConfigGroup, Kind: infrav1.ProviderConfigKindNamespaced, Name: c.Name}
		var reason, msg string
		if c.Unread {
			reason, msg = unread(prev, c, u)
		} else {
			reason, msg = ownRefusal(ns, grants, c)
		}
		if reason == "" && listed == MaxOwnConfigs {
			reason, msg = infrav1.TooManyProviderConfigsReason, fmt.Sprintf("namespace %s has more than %d ProviderConfigs its managed resources may use; its record lists the first %d by name", ns.Name, MaxOwnConfigs, MaxOwnConfigs)
		}
		if reason == "" {
			listed++
			out.Configs = append(out.Configs, u)
			out.Locked = append(out.Locked, Locks(c)...)
			continue
		}
		out.Refused = append(out.Refused, infrav1.RefusedConfig{UsableConfig: u, Reason: reason, Message: truncate(msg, 1024)})
	}
	out.Configs = dedupe(out.Configs)
	out.Locked = MergeLocks(out.Locked)
	sort.Slice(out.Refused, func(i, j int) bool { return key(out.Refused[i].UsableConfig) < key(out.Refused[j].UsableConfig) })
	if len(out.Refused) > MaxRefused {
		out.Refused = out.Refused[:MaxRefused]
	}
	return out, nil
}

// WithGrants returns the record of a namespace whose own configs could not
// be judged: the shared configs the grants give it now, and its own configs
// (listed, refused, locked) as prev has them. What a namespace may use of
// the platform's never waits on judging what it owns.
func WithGrants(ns *corev1.Namespace, grants []infrav1.ClusterProviderConfigGrant, providers []Provider, all bool, prev *infrav1.NamespaceCredentialsSpec) infrav1.NamespaceCredentialsSpec {
	out, _ := Usable(ns, grants, providers, nil, all, nil)
	if prev == nil {
		return out
	}
	for _, c := range prev.Configs {
		if c.Kind == infrav1.ProviderConfigKindNamespaced {
			out.Configs = append(out.Configs, c)
		}
	}
	for _, r := range prev.Refused {
		if r.Kind == infrav1.ProviderConfigKindNamespaced {
			out.Refused = append(out.Refused, r)
		}
	}
	out.Configs = dedupe(out.Configs)
	out.Locked = MergeLocks(prev.Locked)
	out.Networks = prev.Networks
	sort.Slice(out.Refused, func(i, j int) bool { return key(out.Refused[i].UsableConfig) < key(out.Refused[j].UsableConfig) })
	return out
}

// unread is the verdict on a config whose Secrets were not read: the
// previous record's, or not judged yet.
func unread(prev *infrav1.NamespaceCredentialsSpec, c *OwnConfig, u infrav1.UsableConfig) (reason, msg string) {
	if Carried(prev, c) {
		return "", ""
	}
	if prev != nil {
		for _, r := range prev.Refused {
			if r.UsableConfig == u {
				return r.Reason, r.Message
			}
		}
	}
	return infrav1.NotJudgedYetReason, fmt.Sprintf("ProviderConfig %s/%s has not been judged yet: the namespace's reads of credentials Secrets are rationed, and it is judged in turn", c.Provider.ConfigGroup, c.Name)
}

// Locks returns what must not change while the namespace's own config c is
// listed as usable: the config, and each Secret it names whose contents
// decide whose identity the provider acts as.
func Locks(c *OwnConfig) []infrav1.LockedObject {
	out := []infrav1.LockedObject{{APIGroup: c.Provider.ConfigGroup, Kind: string(infrav1.ProviderConfigKindNamespaced), Name: c.Name}}
	if !c.Provider.Secret.ContentDecides() {
		return out
	}
	for _, n := range SecretsNamed(c.Spec) {
		out = append(out, infrav1.LockedObject{Kind: "Secret", Name: n})
	}
	return out
}

// MergeLocks returns the locks of every list, sorted, each once; nil when
// there are none.
func MergeLocks(lists ...[]infrav1.LockedObject) []infrav1.LockedObject {
	seen := map[infrav1.LockedObject]bool{}
	var out []infrav1.LockedObject
	for _, l := range lists {
		for _, o := range l {
			if !seen[o] {
				seen[o] = true
				out = append(out, o)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Kind+"/"+a.APIGroup+"/"+a.Name < b.Kind+"/"+b.APIGroup+"/"+b.Name
	})
	return out
}

// Admits reports whether a namespace whose record is spec may name the
// config (group, kind, name) in a managed resource's spec.providerConfigRef,
// as the admission policy decides it. An unset kind or name is the CRD's
// default, ClusterProviderConfig "default".
func Admits(spec *infrav1.NamespaceCredentialsSpec, group, kind, name string) bool {
	if kind == "" {
		kind = string(infrav1.ProviderConfigKindCluster)
	}
	if name == "" {
		name = "default"
	}
	if kind == string(infrav1.ProviderConfigKindCluster) && spec.AllClusterConfigs {
		return true
	}
	for _, c := range spec.Configs {
		if c.APIGroup == group && string(c.Kind) == kind && c.Name == name {
			return true
		}
	}
	return false
}

// SameUse reports whether two records let a namespace name the same
// configs.
func SameUse(a, b *infrav1.NamespaceCredentialsSpec) bool {
	if a.AllClusterConfigs != b.AllClusterConfigs || len(a.Configs) != len(b.Configs) {
		return false
	}
	for i := range a.Configs {
		if a.Configs[i] != b.Configs[i] {
			return false
		}
	}
	return true
}

// Removed reports whether a namespace whose record was a may no longer
// name something it could (b admits less): only then does anything need
// pausing.
func Removed(a, b *infrav1.NamespaceCredentialsSpec) bool {
	if a.AllClusterConfigs && !b.AllClusterConfigs {
		return true
	}
	for _, c := range a.Configs {
		if !slices.Contains(b.Configs, c) {
			return true
		}
	}
	return false
}

// ownRefusal says why a namespace's own ProviderConfig may not be used; ""
// when it may.
func ownRefusal(ns *corev1.Namespace, grants []infrav1.ClusterProviderConfigGrant, c *OwnConfig) (string, string) {
	what := fmt.Sprintf("ProviderConfig %s/%s", c.Provider.ConfigGroup, c.Name)
	for _, b := range CredentialBlocks {
		src, err := c.Spec.GetString(b + ".source")
		if err != nil && b != CredentialBlocks[0] {
			// Only spec.credentials is always there.
			continue
		}
		switch src {
		case "":
			return infrav1.ProviderConfigNotGrantedReason, fmt.Sprintf("%s: %s.source is not set: only credentials from a Secret of namespace %s are the namespace's own", what, b, ns.Name)
		case SourceSecret:
			if reason, msg := ownSecret(ns, c, b, what); reason != "" {
				return reason, msg
			}
		default:
			covering, msg := coveringGrants(grants, Ambient(c.Provider.ConfigGroup, src), ns)
			if len(covering) == 0 {
				return infrav1.ProviderConfigNotGrantedReason, fmt.Sprintf("%s uses %s.source %s, an identity every namespace shares: %s", what, b, src, msg)
			}
			if why := beyondAmbient(c, allowedRoles(grants, covering)); why != "" {
				return infrav1.ProviderConfigNotGrantedReason, fmt.Sprintf("%s uses %s.source %s, granted to namespace %s by %s, and %s", what, b, src, ns.Name, strings.Join(covering, ", "), why)
			}
		}
	}
	return "", ""
}

// allowedRoles returns the roles the named grants allow, each once.
func allowedRoles(grants []infrav1.ClusterProviderConfigGrant, names []string) map[string]bool {
	allowed := map[string]bool{}
	for i := range grants {
		if slices.Contains(names, grants[i].Name) {
			for _, r := range grants[i].Spec.AllowedRoles {
				allowed[r] = true
			}
		}
	}
	return allowed
}

// awsRoleFields are where a provider-upjet-aws ProviderConfig names a role
// to assume from its credentials.
var awsRoleFields = []string{"spec.credentials.webIdentity.roleARN", "spec.credentials.upbound.webIdentity.roleARN"}

// beyondAmbient says how a namespace's own config on a granted ambient
// source reaches beyond what the grants allow; "" when it does not. A grant
// of an ambient source grants acting as that identity and assuming the
// roles it lists (a role's ARN, or an account's ID for its every role):
// provider-upjet-aws assumes the roles of spec.assumeRoleChain and
// spec.credentials.webIdentity.roleARN with it, and sends its requests, the
// session token among them, to spec.endpoint.url.
func beyondAmbient(c *OwnConfig, allowed map[string]bool) string {
	if c.Provider.Secret != SecretAWS {
		return ""
	}
	var roles []string
	for _, f := range awsRoleFields {
		if r, _ := c.Spec.GetString(f); r != "" {
			roles = append(roles, r)
		}
	}
	if chain, err := c.Spec.GetValue("spec.assumeRoleChain"); err == nil {
		items, _ := chain.([]any)
		for _, it := range items {
			m, _ := it.(map[string]any)
			r, _ := m["roleARN"].(string)
			roles = append(roles, r)
		}
	}
	var refused []string
	for _, r := range roles {
		if !roleAllowed(r, allowed) {
			refused = append(refused, fmt.Sprintf("%q", truncate(r, 256)))
		}
	}
	if len(refused) > 0 {
		return fmt.Sprintf("assumes %s, which no grant of it lists in allowedRoles", strings.Join(refused, ", "))
	}
	if u, err := c.Spec.GetValue("spec.endpoint.url"); err == nil && u != nil {
		return "sends the ambient identity's requests to an endpoint of its own (spec.endpoint.url): the platform puts a custom endpoint in a ClusterProviderConfig"
	}
	return ""
}

// roleAllowed reports whether a role ARN is allowed: listed, or of an
// account listed by its ID (arn:PARTITION:iam::ACCOUNT:role/NAME).
func roleAllowed(arn string, allowed map[string]bool) bool {
	if arn == "" {
		return false
	}
	if allowed[arn] {
		return true
	}
	parts := strings.Split(arn, ":")
	return len(parts) == 6 && parts[0] == "arn" && parts[2] == "iam" && strings.HasPrefix(parts[5], "role/") && allowed[parts[4]] && len(parts[4]) == 12
}

// ownSecret judges the Secret a block of a namespace's own config names.
func ownSecret(ns *corev1.Namespace, c *OwnConfig, block, what string) (string, string) {
	name, _ := c.Spec.GetString(block + ".secretRef.name")
	sns, _ := c.Spec.GetString(block + ".secretRef.namespace")
	k, _ := c.Spec.GetString(block + ".secretRef.key")
	if sns != "" && sns != ns.Name {
		return infrav1.SecretOutsideNamespaceReason, fmt.Sprintf("%s %s.secretRef names namespace %s; a ProviderConfig in namespace %s may only use Secrets of its own namespace", what, block, sns, ns.Name)
	}
	if block != CredentialBlocks[0] {
		// provider-kubernetes' spec.identity holds a cloud identity (a
		// Google service account key, an Azure principal, an Upbound
		// token) whose formats can name external accounts the bridge does
		// not judge: shared credentials belong in a ClusterProviderConfig.
		return infrav1.SharedIdentityInSecretReason, fmt.Sprintf("%s %s: a cloud identity in a Secret is not judged as the namespace's own; the platform puts such credentials in a ClusterProviderConfig and grants it", what, block)
	}
	if why, ok := c.Unreadable[name]; ok {
		return infrav1.CredentialsSecretUnreadableReason, fmt.Sprintf("%s %s.secretRef: %s", what, block, why)
	}
	data, ok := c.Secrets[name]
	if !ok {
		return infrav1.CredentialsSecretNotFoundReason, fmt.Sprintf("Secret %s/%s named by %s %s.secretRef does not exist", ns.Name, name, what, block)
	}
	v, ok := data[k]
	if !ok {
		return infrav1.CredentialsSecretNotFoundReason, fmt.Sprintf("Secret %s/%s named by %s %s.secretRef has no key %q", ns.Name, name, what, block, k)
	}
	if why := SharedInSecret(c.Provider.Secret, v); why != "" {
		return infrav1.SharedIdentityInSecretReason, fmt.Sprintf("%s: Secret %s key %s: %s. Credentials that act as the provider's own identity are shared: the platform puts them in a ClusterProviderConfig and grants it", what, name, k, why)
	}
	return "", ""
}

func key(u infrav1.UsableConfig) string { return u.APIGroup + "/" + string(u.Kind) + "/" + u.Name }

func dedupe(in []infrav1.UsableConfig) []infrav1.UsableConfig {
	sort.Slice(in, func(i, j int) bool { return key(in[i]) < key(in[j]) })
	out := in[:0]
	for i, u := range in {
		if i > 0 && u == in[i-1] {
			continue
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// Revocation returns how a managed resource's metadata changes so that it
// runs only while the config it names may be used (admitted): the keys to
// set and to remove, of its annotations and its CredentialsRevokedLabel
// (meta holds both; their keys differ). A resource naming a config its
// namespace may no longer use is paused and marked (crossplane.io/paused
// stops its provider, deletion included: nothing may use revoked
// credentials, not even to delete); one marked whose config may be used
// again is unmarked, and resumed if the bridge paused it and holds it for
// nothing else (an XR's hold for credentials keeps its own pause).
func Revocation(meta map[string]string, admitted bool) (map[string]string, []string) {
	mark := meta[infrav1.CredentialsRevokedLabel]
	paused := meta[infrav1.CrossplanePausedAnnotation] == "true"
	held := meta[infrav1.CredentialsHoldAnnotation] != ""
	switch {
	case !admitted && mark == "" && paused && !held:
		return map[string]string{infrav1.CredentialsRevokedLabel: infrav1.CredentialsRevokedKept}, nil
	case !admitted && mark == "" && paused:
		// Its XR's hold paused it: the bridge's pause either way.
		return map[string]string{infrav1.CredentialsRevokedLabel: infrav1.CredentialsRevokedPaused}, nil
	case !admitted && (mark == "" || !paused):
		// Running, or marked yet resumed by someone: pause it.
		return map[string]string{infrav1.CrossplanePausedAnnotation: "true", infrav1.CredentialsRevokedLabel: infrav1.CredentialsRevokedPaused}, nil
	case admitted && mark == infrav1.CredentialsRevokedPaused && !held:
		return nil, []string{infrav1.CredentialsRevokedLabel, infrav1.CrossplanePausedAnnotation}
	case admitted && mark != "":
		return nil, []string{infrav1.CredentialsRevokedLabel}
	}
	return nil, nil
}
