package main

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// loadConfig reads a kubeconfig file, or the in-cluster configuration (or
// $KUBECONFIG) when path is empty.
func loadConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		if ic, icErr := rest.InClusterConfig(); icErr == nil && path == "" {
			return ic, nil
		}
		return nil, errors.Wrap(err, "cannot load kubeconfig")
	}
	return cfg, nil
}
