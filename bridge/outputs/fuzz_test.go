package outputs

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// decodeXR turns fuzzed bytes into an XR's content; false when they are not
// a JSON object (the API server would not store them).
func decodeXR(data []byte) (*unstructured.Unstructured, bool) {
	obj := map[string]any{}
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, false
	}
	return &unstructured.Unstructured{Object: obj}, true
}

// namesFields fails t unless every error names a spec or status field and
// says what is wrong with it.
func namesFields(t *testing.T, errs field.ErrorList) {
	t.Helper()
	for _, e := range errs {
		if !strings.HasPrefix(e.Field, "spec.") && !strings.HasPrefix(e.Field, "status.") {
			t.Errorf("an error names no spec or status field: %q (%v)", e.Field, e)
		}
		if !strings.Contains(e.Error(), e.Field) {
			t.Errorf("the message does not name its field %s: %v", e.Field, e)
		}
	}
}

// Any content a composition can put in an InfraCluster XR maps without a
// panic: to an endpoint CAPI can use, or to errors that name the field.
func FuzzMapCluster(f *testing.F) {
	f.Add([]byte(`{"status":{"outputs":{"controlPlaneEndpoint":{"host":"10.0.0.1","port":6443}},"failureDomains":[{"name":"a","controlPlane":true}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		xr, ok := decodeXR(data)
		if !ok {
			return
		}
		c, errs := MapCluster(xr)
		namesFields(t, errs)
		_ = Missing(errs)
		if !c.Endpoint.IsZero() && (c.Endpoint.Host == "" || c.Endpoint.Port < 1 || c.Endpoint.Port > 65535) {
			t.Errorf("mapped an endpoint CAPI cannot use: %+v", c.Endpoint)
		}
	})
}

// Any content of an InfraMachine XR maps without a panic: to a provider ID
// in Kubernetes' format, or to errors that name the field.
func FuzzMapMachine(f *testing.F) {
	f.Add([]byte(`{"status":{"outputs":{"providerID":"aws:///eu-west-1a/i-0123"},"addresses":[{"type":"InternalIP","address":"10.0.0.1"}],"failureDomain":"eu-west-1a"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		xr, ok := decodeXR(data)
		if !ok {
			return
		}
		m, errs := MapMachine(xr)
		namesFields(t, errs)
		_ = Missing(errs)
		if m.ProviderID != "" && !providerIDFormat.MatchString(m.ProviderID) {
			t.Errorf("mapped a provider ID Kubernetes rejects: %q", m.ProviderID)
		}
	})
}

// Any content a composition can put in a ControlPlane XR maps without a
// panic: to an endpoint, a Kubernetes version and a Secret name CAPI and the
// API server accept, or to errors that name the field.
func FuzzMapControlPlane(f *testing.F) {
	f.Add([]byte(`{"status":{"outputs":{"controlPlaneEndpoint":{"host":"10.0.0.1","port":443},"version":"v1.36.5","kubeconfig":{"name":"conn","key":"kubeconfig"}}}}`))
	f.Add([]byte(`{"status":{"outputs":{"version":"1.36","kubeconfig":"apiVersion: v1"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		xr, ok := decodeXR(data)
		if !ok {
			return
		}
		cp, errs := MapControlPlane(xr)
		namesFields(t, errs)
		_ = Missing(errs)
		if len(errs) > 0 {
			return
		}
		if cp.Endpoint.Host == "" || cp.Endpoint.Port < 1 || cp.Endpoint.Port > 65535 {
			t.Errorf("mapped an endpoint CAPI cannot use: %+v", cp.Endpoint)
		}
		if len(cp.Version) < 2 || cp.Version[0] != 'v' {
			t.Errorf("mapped a version that is not Kubernetes': %q", cp.Version)
		}
		if len(validation.IsDNS1123Subdomain(cp.Kubeconfig.Name)) > 0 || len(validation.IsConfigMapKey(cp.Kubeconfig.Key)) > 0 {
			t.Errorf("mapped a Secret key the API server would refuse: %+v", cp.Kubeconfig)
		}
	})
}

// Any content of an InfraMachinePool XR maps without a panic: to a list of
// distinct provider IDs in Kubernetes' format, or to errors that name the
// field.
func FuzzMapMachinePool(f *testing.F) {
	f.Add([]byte(`{"spec":{"replicas":2},"status":{"outputs":{"providerIDList":["aws:///eu-west-1a/i-1","aws:///eu-west-1b/i-2"]}}}`))
	f.Add([]byte(`{"spec":{"replicas":0}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		xr, ok := decodeXR(data)
		if !ok {
			return
		}
		mp, errs := MapMachinePool(xr)
		namesFields(t, errs)
		_ = Missing(errs)
		seen := map[string]bool{}
		for _, id := range mp.ProviderIDList {
			if !providerIDFormat.MatchString(id) || seen[id] {
				t.Errorf("mapped a provider ID list CAPI cannot use: %q", mp.ProviderIDList)
			}
			seen[id] = true
		}
	})
}
