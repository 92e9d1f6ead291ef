package kubeconfig

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

const (
	errParse      = "cannot parse it as a kubeconfig"
	errNoContext  = "it has no current-context"
	errReaches    = "it reaches beyond itself"
	errNoServer   = "its current context's cluster has no server"
	errBadServer  = "its current context's cluster's server is not an http or https URL"
	errNoCluster  = "its current context names a cluster it does not hold"
	errNoAuthInfo = "its current context names a user it does not hold"
	errNoCtx      = "its current-context names a context it does not hold"
)

// Reaches lists every field of the kubeconfig whose value a client acts on
// outside the kubeconfig itself, each as `user "u": exec` or
// `cluster "c": certificate-authority`, sorted: a command (exec), a plugin
// (auth-provider), or a file of the host that reads it (tokenFile,
// client-certificate, client-key, certificate-authority). None is opened,
// run or called here. Empty when the kubeconfig holds everything it uses.
func Reaches(cfg *clientcmdapi.Config) []string {
	var found []string
	for name, u := range cfg.AuthInfos {
		if u == nil {
			continue
		}
		add := func(field string) { found = append(found, fmt.Sprintf("user %q: %s", name, field)) }
		if u.Exec != nil {
			add("exec (runs a command)")
		}
		if u.AuthProvider != nil {
			add("auth-provider (runs a plugin)")
		}
		if u.TokenFile != "" {
			add("tokenFile (a file of the host that reads it)")
		}
		if u.ClientCertificate != "" {
			add("client-certificate (a file of the host that reads it)")
		}
		if u.ClientKey != "" {
			add("client-key (a file of the host that reads it)")
		}
	}
	for name, c := range cfg.Clusters {
		if c != nil && c.CertificateAuthority != "" {
			found = append(found, fmt.Sprintf("cluster %q: certificate-authority (a file of the host that reads it)", name))
		}
	}
	sort.Strings(found)
	return found
}

// Parse reads raw as a kubeconfig, as client-go's clientcmd.Load does,
// without resolving or opening anything it names. Its error quotes nothing
// of raw: a decoder's error can print what it read (a client key among it),
// and the error ends up in objects that are not Secrets.
func Parse(raw []byte) (*clientcmdapi.Config, error) {
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return nil, errors.Wrap(errors.New(parseProblem(err.Error())), errParse)
	}
	return cfg, nil
}

// parseProblem says what kind of problem a decoder's error is, in words of
// its own.
func parseProblem(msg string) string {
	switch {
	case strings.Contains(msg, "duplicate name"):
		return "it names a cluster, user or context twice"
	case strings.Contains(msg, "yaml:"), strings.Contains(msg, "json:"), strings.Contains(msg, "invalid character"):
		return "it is not YAML or JSON of a kubeconfig's shape"
	default:
		return "it is not a kubeconfig"
	}
}

// Usable checks that raw is a kubeconfig a client can connect with using
// nothing but its content: its current context names a cluster with an http
// or https server and a user, and nothing in it reaches beyond itself
// (Reaches). It reads no file and runs nothing; its errors name fields and
// quote no data of raw.
func Usable(raw []byte) error {
	cfg, err := Parse(raw)
	if err != nil {
		return err
	}
	if r := Reaches(cfg); len(r) > 0 {
		return errors.Errorf("%s: %s", errReaches, strings.Join(r, "; "))
	}
	if cfg.CurrentContext == "" {
		return errors.New(errNoContext)
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok || ctx == nil {
		return errors.Errorf("%s: %q", errNoCtx, cfg.CurrentContext)
	}
	cluster, ok := cfg.Clusters[ctx.Cluster]
	if !ok || cluster == nil {
		return errors.Errorf("%s: %q", errNoCluster, ctx.Cluster)
	}
	if ctx.AuthInfo != "" {
		if u, ok := cfg.AuthInfos[ctx.AuthInfo]; !ok || u == nil {
			return errors.Errorf("%s: %q", errNoAuthInfo, ctx.AuthInfo)
		}
	}
	if cluster.Server == "" {
		return errors.New(errNoServer)
	}
	u, err := url.Parse(cluster.Server)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return errors.Errorf("%s: %q", errBadServer, cluster.Server)
	}
	return nil
}
