package outputs

import (
	"fmt"
	"regexp"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
)

// Field paths of the InfraMachine contract.
var (
	specProviderID   = field.NewPath("spec", "providerID")
	outputProviderID = field.NewPath("status", "outputs", "providerID")
	addresses        = field.NewPath("status", "addresses")
	specFailure      = field.NewPath("spec", "failureDomain")
	statusFailure    = field.NewPath("status", "failureDomain")
)

// providerIDFormat is what Kubernetes' Node.spec.providerID looks like:
// <scheme>://<provider-specific part>, for example aws:///eu-west-1a/i-0123.
var providerIDFormat = regexp.MustCompile(`^[a-z][a-z0-9+.-]*://.+$`)

// ValidProviderID reports whether id has a provider ID's form,
// <scheme>://<id>.
func ValidProviderID(id string) bool { return providerIDFormat.MatchString(id) }

// addressTypes are CAPI's MachineAddress types.
var addressTypes = []string{
	string(clusterv1.MachineHostName), string(clusterv1.MachineExternalIP), string(clusterv1.MachineInternalIP),
	string(clusterv1.MachineExternalDNS), string(clusterv1.MachineInternalDNS),
}

// Machine is what the bridge maps from an InfraMachine XR.
type Machine struct {
	// ProviderID spec.providerID must hold. Empty while unknown.
	ProviderID string
}

// MapMachine reads status.outputs.providerID, status.addresses and
// status.failureDomain. spec.providerID never changes once set, so outputs
// that disagree with it are an error.
func MapMachine(xr *unstructured.Unstructured) (Machine, field.ErrorList) {
	p := fieldpath.Pave(xr.Object)
	r := reported[string]{specPath: specProviderID, outPath: outputProviderID, read: providerID,
		show: func(s string) string { return s }, what: "the machine's provider ID"}
	var m Machine
	var errs field.ErrorList
	m.ProviderID, errs = r.settle(p)

	errs = append(errs, checkAddresses(p)...)

	want, wErrs := str(p, specFailure)
	got, gErrs := str(p, statusFailure)
	errs = append(errs, wErrs...)
	errs = append(errs, gErrs...)
	if want != "" && got != "" && want != got {
		errs = append(errs, field.Invalid(statusFailure, got, fmt.Sprintf("the machine was placed in %q but %s is %q", got, specFailure, want)))
	}
	return m, errs
}

// providerID reads an optional provider ID.
func providerID(p *fieldpath.Paved, path *field.Path) (string, field.ErrorList) {
	id, errs := str(p, path)
	if id != "" && !providerIDFormat.MatchString(id) {
		errs = append(errs, field.Invalid(path, id, "must have the form <scheme>://<id>, for example aws:///eu-west-1a/i-0123"))
	}
	return id, errs
}

// str reads an optional string.
func str(p *fieldpath.Paved, path *field.Path) (string, field.ErrorList) {
	s, _, errs := at[string](p, path, "must be a string")
	return s, errs
}

func checkAddresses(p *fieldpath.Paved) field.ErrorList {
	return eachObject(p, addresses, "a list of addresses", "an object with type and address", func(path *field.Path, a map[string]any) field.ErrorList {
		t, _ := a["type"].(string)
		addr, _ := a["address"].(string)
		if !slices.Contains(addressTypes, t) {
			return field.ErrorList{field.NotSupported(path.Child("type"), a["type"], addressTypes)}
		}
		var errs field.ErrorList
		switch {
		case addr == "":
			errs = append(errs, field.Required(path.Child("address"), "must not be empty"))
		case t == "ExternalIP" || t == "InternalIP":
			if validation.IsValidIP(nil, addr) != nil {
				errs = append(errs, field.Invalid(path.Child("address"), addr, "must be an IP address"))
			}
		default:
			for _, msg := range validation.IsDNS1123Subdomain(addr) {
				errs = append(errs, field.Invalid(path.Child("address"), addr, msg))
			}
		}
		return errs
	})
}
