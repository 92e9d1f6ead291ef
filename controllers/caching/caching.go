// Package caching is what the manager's cache holds and how it reads it: the
// transforms that drop what the bridge never reads from every cached object,
// the interning of their strings, and the HTTP client that drops managed
// fields before client-go decodes a list or a watch event.
package caching

import (
	"slices"
	"time"
	"unique"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/internal/leanjson"
)

// Options are the manager's cache options: managed fields
// stripped from everything cached, an optional watch namespace.
func Options(namespace string, syncPeriod time.Duration) cache.Options {
	o := cache.Options{
		DefaultTransform: StripManagedFields,
		ByObject: map[client.Object]cache.ByObject{
			&clusterv1.Machine{}: {Transform: slimMachine},
		},
		SyncPeriod: &syncPeriod,
	}
	if namespace != "" {
		o.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	return o
}

// New is the manager's cache: cache.New, reading from the API server
// through an HTTP client that drops the managed fields of what it lists and
// watches before client-go decodes it (leanjson). StripManagedFields still
// drops them from what comes another way (protobuf, a server that sends
// them in another media type).
func New(cfg *rest.Config, o cache.Options) (cache.Cache, error) {
	hc := o.HTTPClient
	if hc == nil {
		var err error
		if hc, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, errors.Wrap(err, "cannot create the cache's HTTP client")
		}
	}
	lean := *hc
	lean.Transport = leanjson.RoundTripper(hc.Transport)
	o.HTTPClient = &lean
	return cache.New(cfg, o)
}

// StripManagedFields drops managed fields from what is cached, as
// controller-runtime's TransformStripManagedFields does, but from an
// unstructured object (every XR) in place, without decoding its managed
// fields first: measured, that decoding was 7 % of the manager's CPU. Of an
// unstructured object (an XR, a ProviderConfig) it also drops what the bridge
// never reads: kubectl's last applied configuration, as big as the spec of
// an object applied with kubectl, and the conditions but Crossplane's Ready
// and Synced (Responsive on every XR, a composition's own). Its strings are
// interned.
func StripManagedFields(in any) (any, error) {
	switch o := in.(type) {
	case *unstructured.Unstructured:
		if md, ok := o.Object["metadata"].(map[string]any); ok {
			delete(md, "managedFields")
			if a, ok := md["annotations"].(map[string]any); ok {
				delete(a, corev1.LastAppliedConfigAnnotation)
			}
		}
		if st, ok := o.Object["status"].(map[string]any); ok {
			if cs, ok := st["conditions"].([]any); ok {
				st["conditions"] = slices.DeleteFunc(cs, func(c any) bool {
					m, _ := c.(map[string]any)
					return m["type"] != string(xpv2.TypeReady) && m["type"] != string(xpv2.TypeSynced)
				})
			}
		}
		o.Object, _ = interned(o.Object).(map[string]any)
		return o, nil
	case metav1.Object:
		o.SetManagedFields(nil)
		return o, nil
	}
	return in, nil
}

// internMax is the longest string value interned: longer ones (messages,
// patches, certificates) are seldom shared.
const internMax = 64

// interned returns v with its map keys and short strings interned
// (unique.Make): every XR of a kind repeats the same keys and most of the
// same values (kinds, groups, condition types and reasons, label keys), and
// the JSON decoder allocates each anew. Maps are rebuilt, lists changed in
// place. make bench-plane measures the heap per cached object.
func interned(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[unique.Make(k).Value()] = interned(e)
		}
		return out
	case []any:
		for i, e := range x {
			x[i] = interned(e)
		}
		return x
	case string:
		if len(x) <= internMax {
			return unique.Make(x).Value()
		}
	}
	return v
}

// slimMachine keeps of a Machine what the bridge reads: its metadata, its
// spec and, of its status, the bridge's own condition. CAPI's status (its
// conditions, v1beta1's too, addresses, node info) is most of a Machine, and
// Machines are most of what the bridge caches.
func slimMachine(in any) (any, error) {
	m, ok := in.(*clusterv1.Machine)
	if !ok {
		return StripManagedFields(in)
	}
	m.SetManagedFields(nil)
	verdict := meta.FindStatusCondition(m.Status.Conditions, infrav1.CrossplaneInfrastructureReadyCondition)
	status := clusterv1.MachineStatus{}
	if verdict != nil {
		status.Conditions = []metav1.Condition{*verdict}
	}
	m.Status = status
	return m, nil
}

// ClientOptions read XRs from the cache (unstructured caching on) and never
// cache Secrets or ConfigMaps.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{
		Unstructured: true,
		DisableFor:   []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}},
	}}
}
