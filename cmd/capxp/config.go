package main

import (
	"flag"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// errNoKubeconfig says how to point capxp at a cluster, where client-go
// would answer that no configuration has been provided.
var errNoKubeconfig = errors.New("no kubeconfig to reach a cluster with: pass --kubeconfig PATH, set $KUBECONFIG, or write ~/.kube/config")

// clientConfig is the kubeconfig's loader, for the file path (the
// default rules' $KUBECONFIG or ~/.kube/config when empty) and overrides.
func clientConfig(path string, overrides *clientcmd.ConfigOverrides) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// restConfig is the REST configuration of a loader, with errNoKubeconfig
// for an empty one.
func restConfig(loader clientcmd.ClientConfig) (*rest.Config, error) {
	cfg, err := loader.ClientConfig()
	switch {
	case clientcmd.IsEmptyConfig(err):
		return nil, errNoKubeconfig
	case err != nil:
		return nil, errors.Wrap(err, "cannot load kubeconfig")
	}
	return cfg, nil
}

// access is how a reading command reaches a cluster: the kubeconfig and its
// context, whom to impersonate, and the namespace (the context's when
// empty), as its flags name them.
type access struct {
	kubeconfig, context, as, namespace string
	groups                             stringList
}

// flags registers access's flags.
func (a *access) flags(fs *flag.FlagSet) {
	fs.StringVar(&a.namespace, "n", "", "")
	fs.StringVar(&a.namespace, "namespace", "", "")
	fs.StringVar(&a.kubeconfig, "kubeconfig", "", "")
	fs.StringVar(&a.context, "context", "", "")
	fs.StringVar(&a.as, "as", "", "")
	fs.Var(&a.groups, "as-group", "")
}

// client is a client of the cluster with scheme, and the namespace; the
// error is an inputError when the kubeconfig or its context is wrong.
func (a *access) client(scheme *runtime.Scheme) (client.Client, string, error) {
	overrides := &clientcmd.ConfigOverrides{CurrentContext: a.context}
	overrides.AuthInfo.Impersonate, overrides.AuthInfo.ImpersonateGroups = a.as, a.groups
	loader := clientConfig(a.kubeconfig, overrides)
	cfg, err := restConfig(loader)
	if err != nil {
		return nil, "", inputError{err}
	}
	ns := a.namespace
	if ns == "" {
		if ns, _, err = loader.Namespace(); err != nil {
			return nil, "", inputError{errors.Wrap(err, "cannot read the context's namespace")}
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	return c, ns, err
}

// loadConfig is the manager's configuration: the kubeconfig file at path;
// with no path, $KUBECONFIG's or ~/.kube/config, else the in-cluster
// configuration.
func loadConfig(path string) (*rest.Config, error) {
	cfg, err := restConfig(clientConfig(path, &clientcmd.ConfigOverrides{}))
	if err != nil && path == "" {
		if ic, icErr := rest.InClusterConfig(); icErr == nil {
			return ic, nil
		}
	}
	return cfg, err
}
