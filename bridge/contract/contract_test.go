package contract

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

func TestEvaluate(t *testing.T) {
	endpoint := field.NewPath("status", "outputs", "controlPlaneEndpoint")
	providerID := field.NewPath("status", "outputs", "providerID")
	cases := map[string]struct {
		reason string
		obs    verdict.Verdict
		errs   field.ErrorList
		want   verdict.Verdict
	}{
		"CrossplaneFirst": {
			reason: "Crossplane's words win over output errors: they say what stops composition.",
			obs:    verdict.Verdict{Reason: infrav1.CompositionFailedReason, Message: "Synced is False (ReconcileError): boom"},
			errs:   field.ErrorList{field.Required(endpoint, "not reported")},
			want:   verdict.Verdict{Reason: infrav1.CompositionFailedReason, Message: "Synced is False (ReconcileError): boom"},
		},
		"Ready": {
			reason: "Ready and valid outputs satisfy the contract.",
			obs:    verdict.Verdict{Ready: true},
			want:   verdict.Verdict{Ready: true, Reason: infrav1.ContractReadyReason},
		},
		"MissingEndpoint": {
			reason: "A whole output not reported yet is missing, not invalid.",
			obs:    verdict.Verdict{Ready: true},
			errs:   field.ErrorList{field.Required(endpoint, "the composition has not reported the control plane endpoint")},
			want: verdict.Verdict{Reason: infrav1.MissingOutputsReason,
				Message: "status.outputs.controlPlaneEndpoint: Required value: the composition has not reported the control plane endpoint"},
		},
		"MissingProviderID": {
			reason: "The machine's provider ID not reported yet is missing.",
			obs:    verdict.Verdict{Ready: true},
			errs:   field.ErrorList{field.Required(providerID, "not reported")},
			want:   verdict.Verdict{Reason: infrav1.MissingOutputsReason, Message: "status.outputs.providerID: Required value: not reported"},
		},
		"RequiredPartIsInvalid": {
			reason: "An output reported without one of its parts is malformed, though the error is a Required one.",
			obs:    verdict.Verdict{Ready: true},
			errs:   field.ErrorList{field.Required(endpoint.Child("host"), "must not be empty")},
			want:   verdict.Verdict{Reason: infrav1.InvalidOutputsReason, Message: "status.outputs.controlPlaneEndpoint.host: Required value: must not be empty"},
		},
		"MissingAndInvalid": {
			reason: "One malformed output makes the verdict invalid even when another is only missing.",
			obs:    verdict.Verdict{Ready: true},
			errs: field.ErrorList{
				field.Required(endpoint, "not reported"),
				field.Invalid(field.NewPath("status", "failureDomains"), "", "name must not be empty"),
			},
			want: verdict.Verdict{Reason: infrav1.InvalidOutputsReason,
				Message: `[status.outputs.controlPlaneEndpoint: Required value: not reported, status.failureDomains: Invalid value: "": name must not be empty]`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Evaluate(tc.obs, tc.errs)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nEvaluate(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestProvisioned(t *testing.T) {
	cases := map[string]struct {
		reason string
		was    bool
		v      verdict.Verdict
		want   bool
	}{
		"FirstTime":       {reason: "A ready verdict reaches the milestone.", v: verdict.Verdict{Ready: true}, want: true},
		"NotYet":          {reason: "No milestone before the first ready verdict.", v: verdict.Verdict{Reason: infrav1.WaitingForCompositionReason}, want: false},
		"KeptWhenPaused":  {reason: "Once reached it stays, whatever the verdict says later.", was: true, v: verdict.Verdict{Reason: infrav1.CompositionFailedReason}, want: true},
		"KeptWhenReady":   {reason: "Reached and still ready.", was: true, v: verdict.Verdict{Ready: true}, want: true},
		"KeptWhenHeld":    {reason: "A credentials hold does not undo it.", was: true, v: verdict.Verdict{Reason: infrav1.ProviderConfigNotGrantedReason}, want: true},
		"KeptWhenDeleted": {reason: "Deletion does not undo it.", was: true, v: verdict.Verdict{Reason: infrav1.DeletingReason}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Provisioned(tc.was, tc.v); got != tc.want {
				t.Errorf("%s\nProvisioned(%t, %+v) = %t, want %t", tc.reason, tc.was, tc.v, got, tc.want)
			}
		})
	}
}

func TestWaiting(t *testing.T) {
	cases := map[string]struct {
		names []string
		want  string
	}{
		"Few":  {names: []string{"a", "b"}, want: "Waiting for 2 composed resources to be deleted: a, b"},
		"Many": {names: []string{"a", "b", "c", "d", "e", "f", "g"}, want: "Waiting for 7 composed resources to be deleted: a, b, c, d, e and 2 more"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Waiting("composed resources", tc.names); got != tc.want {
				t.Errorf("Waiting() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestShown(t *testing.T) {
	cases := map[string]struct {
		v    verdict.Verdict
		want bool
	}{
		"Ready":                           {v: verdict.Verdict{Ready: true, Reason: infrav1.ContractReadyReason}, want: true},
		"WaitingForComposition":           {v: verdict.Verdict{Reason: infrav1.WaitingForCompositionReason}, want: true},
		"WaitingForBootstrapData":         {v: verdict.Verdict{Reason: infrav1.WaitingForBootstrapDataReason}, want: true},
		"WaitingForClusterInfrastructure": {v: verdict.Verdict{Reason: infrav1.WaitingForClusterInfrastructureReason}, want: true},
		"CompositionFailed":               {v: verdict.Verdict{Reason: infrav1.CompositionFailedReason}, want: false},
		"MissingOutputs":                  {v: verdict.Verdict{Reason: infrav1.MissingOutputsReason}, want: false},
		"InvalidOutputs":                  {v: verdict.Verdict{Reason: infrav1.InvalidOutputsReason}, want: false},
		"InvalidFailureDomain":            {v: verdict.Verdict{Reason: infrav1.InvalidFailureDomainReason}, want: false},
		"InvalidBootstrapDataRef":         {v: verdict.Verdict{Reason: infrav1.InvalidBootstrapDataRefReason}, want: false},
		"NotGranted":                      {v: verdict.Verdict{Reason: infrav1.ProviderConfigNotGrantedReason}, want: false},
		"SecretNotFound":                  {v: verdict.Verdict{Reason: infrav1.CredentialsSecretNotFoundReason}, want: false},
		"Deleting":                        {v: verdict.Verdict{Reason: infrav1.DeletingReason}, want: false},
		"WaitingForMachines":              {v: verdict.Verdict{Reason: infrav1.WaitingForMachinesReason}, want: false},
		"NotControlled":                   {v: verdict.Verdict{Reason: infrav1.NotControlledReason}, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.v.Shown(); got != tc.want {
				t.Errorf("Shown() = %v, want %v", got, tc.want)
			}
		})
	}
}
