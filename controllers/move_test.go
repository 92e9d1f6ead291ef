package controllers

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestMovable: only the CRDs of managed and composite resources are
// labelled for clusterctl move; a kind a tenant can create and name in its
// XR's resourceRefs (a ProviderConfig) is not.
func TestMovable(t *testing.T) {
	k8s := schema.GroupVersion{Group: "kubernetes.m.crossplane.io", Version: "v1alpha1"}
	served := map[string][]string{
		"Object":         {"crossplane", "managed", "kubernetes"},
		"ProviderConfig": {"crossplane", "provider", "kubernetes"},
	}
	cases := map[string]struct {
		gvk        schema.GroupVersionKind
		categories func(schema.GroupVersion) (map[string][]string, error)
		want       bool
		wantErr    bool
	}{
		"ManagedResource": {gvk: k8s.WithKind("Object"), want: true},
		"CompositeResource": {gvk: schema.GroupVersionKind{Group: "platform.example.org", Version: "v1", Kind: "VM"},
			categories: func(schema.GroupVersion) (map[string][]string, error) {
				return map[string][]string{"VM": {"composite"}}, nil
			}, want: true},
		"ProviderConfig":   {gvk: k8s.WithKind("ProviderConfig")},
		"UnknownKind":      {gvk: k8s.WithKind("Nothing")},
		"NoDiscovery":      {gvk: k8s.WithKind("Object"), categories: nil},
		"DiscoveryFailure": {gvk: k8s.WithKind("Object"), categories: func(schema.GroupVersion) (map[string][]string, error) { return nil, errors.New("boom") }, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := &crdLabels{categories: tc.categories}
			if tc.categories == nil && name != "NoDiscovery" {
				l.categories = func(schema.GroupVersion) (map[string][]string, error) { return served, nil }
			}
			got, err := l.movable(tc.gvk)
			if (err != nil) != tc.wantErr {
				t.Fatalf("movable(%s): %v, want error %t", tc.gvk, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("movable(%s) = %t, want %t", tc.gvk, got, tc.want)
			}
		})
	}
}
