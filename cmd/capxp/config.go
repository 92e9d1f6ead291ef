package main

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

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
