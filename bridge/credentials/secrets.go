package credentials

// What a credentials Secret reaches: a namespace owns a ProviderConfig's
// credentials only when the Secret's contents act as nothing but themselves.
// A kubeconfig whose user runs a command, reads a token or a certificate from
// a file, or asks an auth provider plugin acts with whatever the provider's
// process can reach (its service account token, its files, its cloud
// identity). Such a Secret makes the config shared: it needs a grant like an ambient
// source.

import (
	"fmt"
	"strings"

	"github.com/capxp/cluster-api-provider-crossplane/bridge/kubeconfig"
)

// SecretFormat says how a provider reads its credentials Secret, and so what
// in it can reach another identity.
type SecretFormat string

// The Secret formats the bridge can judge.
const (
	// SecretKubeconfig: provider-kubernetes (and provider-helm) read a
	// kubeconfig with client-go's clientcmd.
	SecretKubeconfig SecretFormat = "kubeconfig"
	// SecretAWS: provider-upjet-aws reads the static keys of an AWS shared
	// credentials (INI) file's default section, and nothing else of it.
	SecretAWS SecretFormat = "aws"
	// SecretStatic: the provider reads static keys only and has no way to
	// reach another identity from a Secret. A platform declares it for a
	// provider it has checked.
	SecretStatic SecretFormat = "static"
)

// ContentDecides reports whether what a Secret of the format holds decides
// whose identity the provider acts as (a kubeconfig can name a command, a
// token file): such a Secret is locked while a usable config relies on it.
// The static keys of the other formats are the identity they name, so they
// may be rotated in place.
func (f SecretFormat) ContentDecides() bool {
	return f != SecretAWS && f != SecretStatic
}

// SharedInSecret returns why a credentials Secret's data, read as format,
// reaches an identity other than its own; "" when it does not. Data that
// cannot be read counts as shared: the bridge cannot tell what the provider
// would make of it.
func SharedInSecret(format SecretFormat, data []byte) string {
	switch format {
	case SecretKubeconfig:
		return sharedInKubeconfig(data)
	case SecretAWS, SecretStatic:
		// provider-upjet-aws reads aws_access_key_id, aws_secret_access_key
		// and aws_session_token of the file's default section into static
		// credentials, and nothing else of it: credential_process, role_arn,
		// source_profile and web_identity_token_file are ignored.
		return ""
	default:
		return fmt.Sprintf("the bridge cannot judge Secrets of format %q", format)
	}
}

// sharedInKubeconfig reads a kubeconfig as provider-kubernetes does
// (clientcmd.Load) and names every field that reaches beyond the file
// itself (kubeconfig.Reaches): exec, auth-provider, a token file, and the
// file paths of certificates and keys, which the provider's client would
// read from its own host.
func sharedInKubeconfig(data []byte) string {
	cfg, err := kubeconfig.Parse(data)
	if err != nil {
		return "the Secret's kubeconfig cannot be read: " + firstLine(err.Error())
	}
	found := kubeconfig.Reaches(cfg)
	if len(found) == 0 {
		return ""
	}
	return "the Secret's kubeconfig reaches beyond itself: " + strings.Join(found, "; ")
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
