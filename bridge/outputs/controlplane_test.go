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

func withSpecVersion(u *unstructured.Unstructured, v string) *unstructured.Unstructured {
	_ = unstructured.SetNestedField(u.Object, v, "spec", "version")
	return u
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
			xr:     cpOutputs(ep(endpoint.Host, int64(443)), "v1.36.5", map[string]any{"name": "demo-eks-conn", "key": "kubeconfig"}),
			want:   ControlPlane{Endpoint: endpoint, Version: "v1.36.5", Kubeconfig: SecretKey{Name: "demo-eks-conn", Key: "kubeconfig"}},
		},
		"KubeconfigKeyDefaults": {
			reason: "without a key the kubeconfig is under value, as in CAPI's own kubeconfig Secrets",
			xr:     cpOutputs(ep(endpoint.Host, int64(443)), "v1.36.5", map[string]any{"name": "demo-eks-conn"}),
			want:   ControlPlane{Endpoint: endpoint, Version: "v1.36.5", Kubeconfig: SecretKey{Name: "demo-eks-conn", Key: "value"}},
		},
		"NothingYet": {
			reason:  "a composition that has reported nothing yet is missing outputs, not reporting bad ones",
			xr:      cpOutputs(nil, nil, nil),
			errs:    []string{"status.outputs.controlPlaneEndpoint: Required", "status.outputs.version: Required", "status.outputs.kubeconfig: Required"},
			missing: true,
		},
		"VersionNotKubernetes": {
			reason: "a version that is not a Kubernetes version is named",
			xr:     cpOutputs(ep(endpoint.Host, int64(443)), "1.36.x", map[string]any{"name": "demo-eks-conn"}),
			want:   ControlPlane{Endpoint: endpoint, Kubeconfig: SecretKey{Name: "demo-eks-conn", Key: "value"}},
			errs:   []string{`status.outputs.version: Invalid value: "1.36.x": must be a Kubernetes version such as v1.36.5, or a minor version such as 1.36`},
		},
		"MinorVersionServesTheAskedPatch": {
			reason: "a service that reports only its minor (EKS: 1.36) serves the patch spec.version asks for within it: CAPI sees no upgrade under way",
			xr:     withSpecVersion(cpOutputs(ep(endpoint.Host, int64(443)), "1.36", map[string]any{"name": "demo-eks-conn"}), "v1.36.5"),
			want:   ControlPlane{Endpoint: endpoint, Version: "v1.36.5", Kubeconfig: SecretKey{Name: "demo-eks-conn", Key: "value"}},
		},
		"MinorVersionWithV": {
			reason: "the minor may carry the v",
			xr:     withSpecVersion(cpOutputs(ep(endpoint.Host, int64(443)), "v1.36", map[string]any{"name": "demo-eks-conn"}), "v1.36.5"),
			want:   ControlPlane{Endpoint: endpoint, Version: "v1.36.5", Kubeconfig: SecretKey{Name: "demo-eks-conn", Key: "value"}},
		},
		"MinorVersionOfAnotherMinor": {
			reason: "a service still on the previous minor serves that minor's first patch: CAPI sees the upgrade under way",
			xr:     withSpecVersion(cpOutputs(ep(endpoint.Host, int64(443)), "1.36", map[string]any{"name": "demo-eks-conn"}), "v1.37.1"),
			want:   ControlPlane{Endpoint: endpoint, Version: "v1.36.0", Kubeconfig: SecretKey{Name: "demo-eks-conn", Key: "value"}},
		},
		"MinorVersionNothingAsked": {
			reason: "without spec.version the minor's first patch is served",
			xr:     cpOutputs(ep(endpoint.Host, int64(443)), "1.36", map[string]any{"name": "demo-eks-conn"}),
			want:   ControlPlane{Endpoint: endpoint, Version: "v1.36.0", Kubeconfig: SecretKey{Name: "demo-eks-conn", Key: "value"}},
		},
		"VersionNotString": {
			reason: "a number is not a version",
			xr:     cpOutputs(ep(endpoint.Host, int64(443)), int64(136), map[string]any{"name": "demo-eks-conn"}),
			want:   ControlPlane{Endpoint: endpoint, Kubeconfig: SecretKey{Name: "demo-eks-conn", Key: "value"}},
			errs:   []string{"status.outputs.version: Invalid value: 136: must be a string"},
		},
		"KubeconfigBadName": {
			reason: "a Secret name the API server would refuse is named, with the field",
			xr:     cpOutputs(ep(endpoint.Host, int64(443)), "v1.36.5", map[string]any{"name": "Not/A/Name", "key": "a b"}),
			want:   ControlPlane{Endpoint: endpoint, Version: "v1.36.5", Kubeconfig: SecretKey{Name: "Not/A/Name", Key: "a b"}},
			errs:   []string{`status.outputs.kubeconfig.name: Invalid value: "Not/A/Name"`, `status.outputs.kubeconfig.key: Invalid value: "a b"`},
		},
		"KubeconfigNotAnObject": {
			reason: "the kubeconfig itself is never an output: a string there is refused",
			xr:     cpOutputs(ep(endpoint.Host, int64(443)), "v1.36.5", "apiVersion: v1\nkind: Config"),
			want:   ControlPlane{Endpoint: endpoint, Version: "v1.36.5"},
			errs:   []string{"status.outputs.kubeconfig: Invalid value: \"apiVersion: v1\\nkind: Config\": must be an object with the Secret's name and key"},
		},
		"KubeconfigWithoutName": {
			reason: "a reference without a name is incomplete",
			xr:     cpOutputs(ep(endpoint.Host, int64(443)), "v1.36.5", map[string]any{"key": "kubeconfig"}),
			want:   ControlPlane{Endpoint: endpoint, Version: "v1.36.5", Kubeconfig: SecretKey{Key: "kubeconfig"}},
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
