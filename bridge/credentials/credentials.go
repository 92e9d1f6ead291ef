// Package credentials decides whether a composite resource may use the
// Crossplane credentials its spec.providerConfigRef names: a namespaced
// ProviderConfig is only ever looked up in the XR's own namespace; a shared
// ClusterProviderConfig only when a ClusterProviderConfigGrant allows the
// XR's namespace; and the config's credentials secret must exist.
package credentials

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// Result is the outcome of resolving an XR's credentials.
type Result struct {
	// Ready is true when the credentials may be used.
	Ready bool
	// Reason is a stable CamelCase reason.
	Reason string
	// Message says what was found, or what is missing.
	Message string
}

// Granted reports whether any grant lets the namespace use the
// ClusterProviderConfig; when none does, its message names the grants for
// that config that do not cover the namespace.
// Grants for one config add up. An empty selector matches nothing.
func Granted(grants []infrav1.ClusterProviderConfigGrant, ref infrav1.ClusterProviderConfigReference, ns *corev1.Namespace) (bool, string, error) {
	var others []string
	for i := range grants {
		g := &grants[i]
		if g.Spec.ProviderConfigRef != ref {
			continue
		}
		ok, err := covers(g.Spec.AllowedNamespaces, ns)
		if err != nil {
			return false, "", errors.Wrapf(err, "grant %s", g.Name)
		}
		if ok {
			return true, "", nil
		}
		others = append(others, g.Name)
	}
	sort.Strings(others)
	msg := fmt.Sprintf("namespace %s may not use ClusterProviderConfig %s/%s: no ClusterProviderConfigGrant allows it", ns.Name, ref.APIGroup, ref.Name)
	if len(others) > 0 {
		msg += fmt.Sprintf(" (grants for it that do not cover %s: %s)", ns.Name, strings.Join(others, ", "))
	}
	return false, msg, nil
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
