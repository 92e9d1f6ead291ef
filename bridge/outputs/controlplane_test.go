package outputs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

func cpOutputs(endpoint map[string]any, version, kubeconfig any) *unstructured.Unstructured {
	o := map[string]any{}
	if endpoint != nil {
		o["controlPlaneEndpoint"] = endpoint
	}
	if version != nil {
		o["version"] = version
	}
	if kubeconfig != nil {
		o["kubeconfig"] = kubeconfig
	}
	return xr(nil, map[string]any{"outputs": o})
}

func TestMapControlPlane(t *testing.T) {
	endpoint := infrav1.APIEndpoint{Host: "abc.gr7.eks.amazonaws.com", Port: 443}
	cases := map[string]struct {
		reason  string
		xr      *unstructured.Unstructured
		want    ControlPlane
		errs    []string
		missing bool
	}{
		"AllOutputs": {
			reason: "endpoint, version and the kubeconfig Secret map",
			xr:     cpOutputs(ep(endpoint.Host, int64(443)), "v1.36.3", map[string]any{"name": "demo-eks-conn", "key": "kubeconfig"}),
			want:   ControlPlane{Endpoint: endpoint, Version: "v1.36.3", Kubeconfig: SecretKey{Name: "demo-eks-conn", Key: "kubeconfig"}},
		},
		"KubeconfigKeyDefaults": {
			reason: "without a key the kubeconfig is under value, as in CAPI's own kubeconfig Secrets",
			xr:     cpOutputs(ep(endpoint.Host, int64(443)), "v1.36.3", map[string]any{"name": "demo-eks-conn"}),
			want:   ControlPlane{Endpoint: endpoint, Version: "v1.36.3", Kubeconfig: SecretKey{Name: "demo-eks-conn", Key: "value"}},
		},
		"NothingYet": {
			reason:  "a composition that has reported nothing yet is missing outputs, not reporting bad ones",
			xr:      cpOutputs(nil, nil, nil),
			errs:    []string{"status.outputs.controlPlaneEndpoint: Required", "status.outputs.version: Required", "status.outputs.kubeconfig: Required"},
			missing: true,
		},
		"VersionNotKubernetes": {
			reason: "a version that is not a Kubernetes version (EKS reports 1.36, without the v and the patch) is named",
			xr:     cpOutputs(ep(endpoint.Host, int64(443)), "1.36", map[string]any{"name": "demo-eks-conn"}),
			want:   ControlPlane{Endpoint: endpoint, Kubeconfig: SecretKey{Name: "demo-eks-conn", Key: "value"}},
			errs:   []string{`status.outputs.version: Invalid value: "1.36": must be a Kubernetes version such as v1.36.3`},
		},
		"VersionNotString": {
			reason: "a number is not a version",
			xr:     cpOutputs(ep(endpoint.Host, int64(443)), int64(136), map[string]any{"name": "demo-eks-conn"}),
			want:   ControlPlane{Endpoint: endpoint, Kubeconfig: SecretKey{Name: "demo-eks-conn", Key: "value"}},
			errs:   []string{"status.outputs.version: Invalid value: 136: must be a string"},
		},
		"KubeconfigBadName": {
			reason: "a Secret name the API server would refuse is named, with the field",
			xr:     cpOutputs(ep(endpoint.Host, int64(443)), "v1.36.3", map[string]any{"name": "Not/A/Name", "key": "a b"}),
			want:   ControlPlane{Endpoint: endpoint, Version: "v1.36.3", Kubeconfig: SecretKey{Name: "Not/A/Name", Key: "a b"}},
			errs:   []string{`status.outputs.kubeconfig.name: Invalid value: "Not/A/Name"`, `status.outputs.kubeconfig.key: Invalid value: "a b"`},
		},
		"KubeconfigNotAnObject": {
			reason: "the kubeconfig itself is never an output: a string there is refused",
			xr:     cpOutputs(ep(endpoint.Host, int64(443)), "v1.36.3", "apiVersion: v1\nkind: Config"),
			want:   ControlPlane{Endpoint: endpoint, Version: "v1.36.3"},
			errs:   []string{"status.outputs.kubeconfig: Invalid value: \"apiVersion: v1\\nkind: Config\": must be an object with the Secret's name and key"},
		},
		"KubeconfigWithoutName": {
			reason: "a reference without a name is incomplete",
			xr:     cpOutputs(ep(endpoint.Host, int64(443)), "v1.36.3", map[string]any{"key": "kubeconfig"}),
			want:   ControlPlane{Endpoint: endpoint, Version: "v1.36.3", Kubeconfig: SecretKey{Key: "kubeconfig"}},
			errs:   []string{"status.outputs.kubeconfig.name: Required value: must name a Secret in the XR's namespace"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, errs := MapControlPlane(tc.xr)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nMapControlPlane(...): -want, +got:\n%s", tc.reason, diff)
			}
			if len(errs) != len(tc.errs) {
				t.Fatalf("%s\nMapControlPlane(...) errors: want %q, got %v", tc.reason, tc.errs, errs)
			}
			for i := range errs {
				if !contains(errs[i].Error(), tc.errs[i]) {
					t.Errorf("%s\nMapControlPlane(...) error %d: want it to contain %q, got %q", tc.reason, i, tc.errs[i], errs[i].Error())
				}
			}
			if got := Missing(errs); got != tc.missing {
				t.Errorf("%s\nMissing(...): want %t, got %t", tc.reason, tc.missing, got)
			}
		})
	}
}
