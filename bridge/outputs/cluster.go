package outputs

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// Field paths of the InfraCluster contract.
var (
	specEndpoint   = field.NewPath("spec", "controlPlaneEndpoint")
	outputEndpoint = field.NewPath("status", "outputs", "controlPlaneEndpoint")
	failureDomains = field.NewPath("status", "failureDomains")
)

// Cluster is what the bridge maps from an InfraCluster XR.
type Cluster struct {
	// Endpoint spec.controlPlaneEndpoint must hold. Zero while unknown.
	Endpoint infrav1.APIEndpoint
}

// MapCluster reads status.outputs.controlPlaneEndpoint and
// status.failureDomains. The endpoint comes from the outputs or, for
// externally provisioned infrastructure, from spec.controlPlaneEndpoint set by
// the user; once spec holds one it never changes, so outputs that disagree
// with it are an error.
func MapCluster(xr *unstructured.Unstructured) (Cluster, field.ErrorList) {
	p := fieldpath.Pave(xr.Object)
	r := reported[infrav1.APIEndpoint]{specPath: specEndpoint, outPath: outputEndpoint, read: endpoint,
		show: hostPort, what: "the control plane endpoint"}
	var c Cluster
	var errs field.ErrorList
	c.Endpoint, errs = r.settle(p)
	errs = append(errs, checkFailureDomains(p)...)
	return c, errs
}

// EndpointNotRequired drops, from MapCluster's errors, the one saying the
// endpoint was not reported: under a managed control plane the service's
// endpoint is the cluster's, and the infrastructure need report none. An
// endpoint it reports must still be valid.
func EndpointNotRequired(errs field.ErrorList) field.ErrorList {
	out := make(field.ErrorList, 0, len(errs))
	for _, e := range errs {
		if e.Type == field.ErrorTypeRequired && e.Field == outputEndpoint.String() {
			continue
		}
		out = append(out, e)
	}
	return out
}

// endpoint reads a host and port at path. An absent object is the zero
// endpoint; a present one must be complete and valid.
func endpoint(p *fieldpath.Paved, path *field.Path) (infrav1.APIEndpoint, field.ErrorList) {
	obj, ok, errs := at[map[string]any](p, path, "must be an object with host and port")
	if !ok || errs != nil {
		return infrav1.APIEndpoint{}, errs
	}
	host := obj["host"]
	hostStr, isStr := host.(string)
	switch {
	case host == nil || hostStr == "" && isStr:
		errs = append(errs, field.Required(path.Child("host"), "must not be empty"))
	case !isStr:
		errs = append(errs, field.Invalid(path.Child("host"), host, "must be a string"))
	default:
		for _, msg := range hostErrors(hostStr) {
			errs = append(errs, field.Invalid(path.Child("host"), hostStr, msg))
		}
	}
	port, perr := integer(obj["port"])
	switch {
	case perr != "":
		errs = append(errs, field.Invalid(path.Child("port"), obj["port"], perr))
	case port < 1 || port > 65535:
		errs = append(errs, field.Invalid(path.Child("port"), port, "must be between 1 and 65535"))
	}
	if len(errs) > 0 {
		return infrav1.APIEndpoint{}, errs
	}
	return infrav1.APIEndpoint{Host: hostStr, Port: int32(port)}, nil //nolint:gosec // checked to be in 1-65535.
}

// hostErrors checks that a host is an IP address or a DNS name.
func hostErrors(host string) []string {
	if validation.IsValidIP(nil, host) == nil {
		return nil
	}
	return validation.IsDNS1123Subdomain(host)
}

// integer reads a JSON number that must be a whole number.
func integer(v any) (int64, string) {
	switch n := v.(type) {
	case int64:
		return n, ""
	case int:
		return int64(n), ""
	case int32:
		return int64(n), ""
	case float64:
		if n != float64(int64(n)) {
			return 0, "must be a whole number"
		}
		return int64(n), ""
	case nil:
		return 0, "must be set"
	default:
		return 0, "must be a number"
	}
}

func checkFailureDomains(p *fieldpath.Paved) field.ErrorList {
	seen := map[string]bool{}
	return eachObject(p, failureDomains, "a list of failure domains (CAPI v1beta2 shape)", "an object with a name", func(path *field.Path, fd map[string]any) field.ErrorList {
		var errs field.ErrorList
		name, _ := fd["name"].(string)
		switch {
		case name == "":
			errs = append(errs, field.Required(path.Child("name"), "must not be empty"))
		case seen[name]:
			errs = append(errs, field.Duplicate(path.Child("name"), name))
		}
		seen[name] = true
		if cp, set := fd["controlPlane"]; set && cp != nil {
			if _, ok := cp.(bool); !ok {
				errs = append(errs, field.Invalid(path.Child("controlPlane"), cp, "must be a boolean"))
			}
		}
		return errs
	})
}

func hostPort(e infrav1.APIEndpoint) string { return fmt.Sprintf("%s:%d", e.Host, e.Port) }

// at reads the optional value at path as a T: absent (or null) is the zero
// T and not present; a value of another type is present and an error saying
// it must be one.
func at[T any](p *fieldpath.Paved, path *field.Path, must string) (T, bool, field.ErrorList) {
	var t T
	v := value(p, path)
	if v == nil {
		return t, false, nil
	}
	t, ok := v.(T)
	if !ok {
		return t, true, field.ErrorList{field.Invalid(path, v, must)}
	}
	return t, true, nil
}

// eachObject checks the optional list at path (absent is empty): it must be
// a list (mustList says of what), each item an object (mustItem says with
// what), which check checks.
func eachObject(p *fieldpath.Paved, path *field.Path, mustList, mustItem string, check func(*field.Path, map[string]any) field.ErrorList) field.ErrorList {
	list, _, errs := at[[]any](p, path, "must be "+mustList)
	for i, item := range list {
		obj, ok := item.(map[string]any)
		if !ok {
			errs = append(errs, field.Invalid(path.Index(i), item, "must be "+mustItem))
			continue
		}
		errs = append(errs, check(path.Index(i), obj)...)
	}
	return errs
}

// value reads an optional field: nil when it is absent (or its parent is
// not an object), which every reader here treats as not reported.
func value(p *fieldpath.Paved, path *field.Path) any {
	v, _ := p.GetValue(path.String())
	return v
}
