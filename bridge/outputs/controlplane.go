package outputs

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// Field paths of the ControlPlane contract.
var (
	outputVersion    = field.NewPath("status", "outputs", "version")
	outputKubeconfig = field.NewPath("status", "outputs", "kubeconfig")
)

// DefaultKubeconfigKey is the key of a kubeconfig Secret's data that holds
// the kubeconfig when the composition names none: the key CAPI's own
// <cluster>-kubeconfig Secrets use.
const DefaultKubeconfigKey = "value"

// ControlPlane is what the bridge maps from a ControlPlane XR.
type ControlPlane struct {
	// Endpoint spec.controlPlaneEndpoint must hold.
	Endpoint infrav1.APIEndpoint
	// Version of Kubernetes the control plane serves.
	Version string
	// Kubeconfig names the Secret key, in the XR's namespace, that holds
	// the control plane's kubeconfig.
	Kubeconfig SecretKey
}

// SecretKey is a key of a Secret in the XR's namespace.
type SecretKey struct {
	Name string
	Key  string
}

// MapControlPlane reads status.outputs: the endpoint (as MapCluster reads
// it, immutable once in spec), the version the service reports, and the
// Secret that holds its kubeconfig. All three are required before the
// control plane counts as initialized: CAPI connects to the cluster with the
// kubeconfig as soon as it is.
func MapControlPlane(xr *unstructured.Unstructured) (ControlPlane, field.ErrorList) {
	p := fieldpath.Pave(xr.Object)
	var cp ControlPlane
	// The endpoint as an InfraCluster's; a control plane reports no
	// failure domains, so MapCluster finds none to check.
	c, errs := MapCluster(xr)
	cp.Endpoint = c.Endpoint

	switch v := value(p, outputVersion).(type) {
	case nil:
		errs = append(errs, field.Required(outputVersion, "the composition has not reported the Kubernetes version the control plane serves"))
	case string:
		if minor := minorOnly.FindStringSubmatch(v); minor != nil {
			asked, _ := p.GetString("spec.version")
			cp.Version = servedPatch(minor[1], minor[2], asked)
			break
		}
		if _, err := version.ParseSemantic(v); err != nil || len(v) < 2 || v[0] != 'v' {
			errs = append(errs, field.Invalid(outputVersion, v, "must be a Kubernetes version such as v1.36.5, or a minor version such as 1.36"))
			break
		}
		cp.Version = v
	default:
		errs = append(errs, field.Invalid(outputVersion, v, "must be a string"))
	}

	switch v := value(p, outputKubeconfig).(type) {
	case nil:
		errs = append(errs, field.Required(outputKubeconfig, "the composition has not reported the Secret that holds the control plane's kubeconfig"))
	case map[string]any:
		name, _ := v["name"].(string)
		key, isStr := v["key"].(string)
		if name == "" {
			errs = append(errs, field.Required(outputKubeconfig.Child("name"), "must name a Secret in the XR's namespace"))
		} else {
			for _, msg := range validation.IsDNS1123Subdomain(name) {
				errs = append(errs, field.Invalid(outputKubeconfig.Child("name"), name, msg))
			}
		}
		switch {
		case v["key"] == nil || key == "" && isStr:
			key = DefaultKubeconfigKey
		case !isStr:
			errs = append(errs, field.Invalid(outputKubeconfig.Child("key"), v["key"], "must be a string"))
		default:
			for _, msg := range validation.IsConfigMapKey(key) {
				errs = append(errs, field.Invalid(outputKubeconfig.Child("key"), key, msg))
			}
		}
		cp.Kubeconfig = SecretKey{Name: name, Key: key}
	default:
		errs = append(errs, field.Invalid(outputKubeconfig, v, "must be an object with the Secret's name and key"))
	}
	return cp, errs
}

// minorOnly is a version a managed service reports without its patch
// level (EKS reports 1.36), with or without the v.
var minorOnly = regexp.MustCompile(`^v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// servedPatch is the version a service that reports only its minor version
// serves. A service manages the patch level within a minor itself: while
// the minor is the one spec.version asks for, it serves that version, and
// CAPI, which compares spec.version with status.version, sees no upgrade
// under way; on another minor (an upgrade the service has not finished) it
// serves that minor's first patch, which CAPI reads as not yet upgraded.
func servedPatch(major, minor, asked string) string {
	if v, err := version.ParseSemantic(asked); err == nil && len(asked) > 1 && asked[0] == 'v' &&
		fmt.Sprint(v.Major()) == major && fmt.Sprint(v.Minor()) == minor {
		return asked
	}
	return "v" + major + "." + minor + ".0"
}

// String is how an initialized control plane reads in an event.
func (cp ControlPlane) String() string {
	return fmt.Sprintf("control plane %s initialized at %s:%d", cp.Version, cp.Endpoint.Host, cp.Endpoint.Port)
}
