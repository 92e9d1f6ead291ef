package gate

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// injectable are the spec fields the gate may inject.
var injectable = map[string]bool{"bootstrap": true, "failureDomain": true, "network": true, "providerConfigRef": true}

// Whatever the machine XR, the cluster XR, the Machine and the Cluster hold,
// the gate decides without a panic: open, injecting only its own fields
// and only what the XR lacks; closed while waiting; or closed for bad input
// with a message that names the field.
func FuzzDecide(f *testing.F) {
	f.Add(
		[]byte(`{"spec":{"parameters":{"size":"small"}}}`),
		[]byte(`{"spec":{"parameters":{"region":"eu-west-1"},"providerConfigRef":{"kind":"ProviderConfig","name":"a"}},"status":{"failureDomains":[{"name":"a"}],"outputs":{"network":{"id":"vpc-1","subnets":[{"id":"s-1","failureDomain":"a","role":"Private"}],"securityGroups":[{"id":"sg-1","role":"Node"}]}}}}`),
		[]byte(`{"metadata":{"name":"m"},"spec":{"clusterName":"c","failureDomain":"a","bootstrap":{"dataSecretName":"m-bootstrap"}}}`),
		[]byte(`{"metadata":{"name":"c"},"status":{"initialization":{"infrastructureProvisioned":true}}}`),
	)
	f.Fuzz(func(t *testing.T, xrData, clusterXRData, machineData, clusterData []byte) {
		xr, cxr := map[string]any{}, map[string]any{}
		m, c := &clusterv1.Machine{}, &clusterv1.Cluster{}
		if json.Unmarshal(xrData, &xr) != nil || json.Unmarshal(machineData, m) != nil || json.Unmarshal(clusterData, c) != nil {
			return
		}
		in := Inputs{Machine: m, Cluster: c, XR: &unstructured.Unstructured{Object: xr}}
		if json.Unmarshal(clusterXRData, &cxr) == nil {
			in.ClusterXR = &unstructured.Unstructured{Object: cxr}
		}
		d := Decide(in)
		if d.Ready {
			spec, _ := xr["spec"].(map[string]any)
			if d.Reason != "" || d.Message != "" {
				t.Errorf("open with a reason: %+v", d)
			}
			for k := range d.Spec {
				if !injectable[k] {
					t.Errorf("injects spec.%s, which is not the gate's", k)
				}
				own, ok := spec[k]
				if !ok {
					continue
				}
				// The network is completed field by field, never
				// overwritten.
				mine, isMap := own.(map[string]any)
				injected, _ := d.Spec[k].(map[string]any)
				if k != "network" || !isMap {
					t.Errorf("injects spec.%s over what the XR holds", k)
				}
				for f := range injected {
					if _, ok := mine[f]; ok {
						t.Errorf("injects spec.network.%s over what the XR holds", f)
					}
				}
			}
			return
		}
		if d.Reason == "" || d.Message == "" || len(d.Spec) > 0 {
			t.Errorf("closed without a reason, or injecting: %+v", d)
		}
		switch d.Reason {
		case infrav1.WaitingForClusterInfrastructureReason, infrav1.WaitingForBootstrapDataReason:
		case infrav1.InvalidFailureDomainReason, infrav1.InvalidBootstrapDataRefReason:
			if !strings.Contains(d.Message, "spec.") {
				t.Errorf("a rejection names no field: %s", d.Message)
			}
		default:
			t.Errorf("unknown reason %q", d.Reason)
		}
	})
}
