package xrd

import (
	"testing"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"k8s.io/utils/ptr"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

func TestWarnings(t *testing.T) {
	policy := func(p xpv2.UpdatePolicy) mod {
		return func(x *xpextv2.CompositeResourceDefinition) { x.Spec.DefaultCompositionUpdatePolicy = ptr.To(p) }
	}
	cases := map[string]struct {
		reason string
		xrd    *xpextv2.CompositeResourceDefinition
		warns  bool
	}{
		"MachinesPinned": {
			reason: "a machine XRD whose XRs keep their Composition revision is what CAPI expects",
			xrd:    xrd(infrav1.ContractInfraMachine, machineSchema, asMachine, policy(xpv2.UpdateManual)),
		},
		"MachinesFollowExplicitly": {
			reason: "running machines would take a new revision in place",
			xrd:    xrd(infrav1.ContractInfraMachine, machineSchema, asMachine, policy(xpv2.UpdateAutomatic)),
			warns:  true,
		},
		"MachinesFollowByDefault": {
			reason: "Crossplane's default policy is Automatic",
			xrd:    xrd(infrav1.ContractInfraMachine, machineSchema, asMachine),
			warns:  true,
		},
		"ControlPlaneFollows": {
			reason: "a managed control plane is changed in place, as its service is: it follows its Composition",
			xrd:    xrd(infrav1.ContractControlPlane, controlPlaneSchema, policy(xpv2.UpdateAutomatic)),
		},
		"ClusterFollows": {
			reason: "a cluster XR is changed in place by CAPI's design: it follows its Composition",
			xrd:    xrd(infrav1.ContractInfraCluster, machineSchema, policy(xpv2.UpdateAutomatic)),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Warnings(tc.xrd); (len(got) > 0) != tc.warns {
				t.Errorf("%s\nWarnings(...): %q, want warnings: %t", tc.reason, got, tc.warns)
			}
		})
	}
}
