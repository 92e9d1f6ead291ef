package gate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

func cluster(provisioned bool) *clusterv1.Cluster {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "alpha"}}
	c.Status.Initialization.InfrastructureProvisioned = ptr.To(provisioned)
	return c
}

func machine(secret, fd string, controlPlane bool) *clusterv1.Machine {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "alpha-md-0-abc", Labels: map[string]string{}}}
	if secret != "" {
		m.Spec.Bootstrap.DataSecretName = ptr.To(secret)
	}
	m.Spec.FailureDomain = fd
	if controlPlane {
		m.Labels[clusterv1.MachineControlPlaneLabel] = ""
	}
	return m
}

func u(o map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: o} }

var awsClusterXR = u(map[string]any{
	"kind":     "CrossplaneCluster",
	"metadata": map[string]any{"name": "alpha"},
	"spec": map[string]any{
		"parameters":        map[string]any{"region": "eu-west-1"},
		"providerConfigRef": map[string]any{"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": "team-a"},
	},
	"status": map[string]any{
		"failureDomains": []any{map[string]any{"name": "eu-west-1a"}, map[string]any{"name": "eu-west-1b"}},
		"outputs": map[string]any{"network": map[string]any{
			"id": "vpc-1",
			"subnets": []any{
				map[string]any{"id": "subnet-pub-a", "failureDomain": "eu-west-1a", "role": "Public"},
				map[string]any{"id": "subnet-priv-a", "failureDomain": "eu-west-1a", "role": "Private"},
				map[string]any{"id": "subnet-priv-b", "failureDomain": "eu-west-1b", "role": "Private"},
			},
			"securityGroups": []any{
				map[string]any{"id": "sg-cp", "role": "ControlPlane"},
				map[string]any{"id": "sg-node", "role": "Node"},
				map[string]any{"id": "sg-lb", "role": "LoadBalancer"},
			},
		}},
	},
})

func TestDecide(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     Inputs
		want   Decision
		// sources, when set, are the Sources wanted; other cases leave
		// them out of the comparison.
		sources []string
	}{
		"WaitForClusterInfrastructure": {
			reason: "nothing is composed before the cluster's infrastructure is provisioned",
			in:     Inputs{Machine: machine("boot", "", false), Cluster: cluster(false), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want:   Decision{Verdict: verdict.Verdict{Reason: infrav1.WaitingForClusterInfrastructureReason, Message: "Waiting for the infrastructure of Cluster alpha to be provisioned"}},
		},
		"WaitForBootstrapData": {
			reason: "nothing is composed before the bootstrap data exists",
			in:     Inputs{Machine: machine("", "", false), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want:   Decision{Verdict: verdict.Verdict{Reason: infrav1.WaitingForBootstrapDataReason, Message: "Waiting for the bootstrap data secret of Machine alpha-md-0-abc"}},
		},
		"OpenWorker": {
			reason: "a worker gets the secret reference, its failure domain, the private subnet there, the node security group and the cluster's credentials",
			in:     Inputs{Machine: machine("alpha-md-0-abc", "eu-west-1a", false), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"bootstrap":     map[string]any{"dataSecretRef": map[string]any{"name": "alpha-md-0-abc", "key": "value"}},
				"failureDomain": "eu-west-1a",
				"network":       map[string]any{"region": "eu-west-1", "networkID": "vpc-1", "subnetID": "subnet-priv-a", "securityGroupIDs": []any{"sg-node"}},
				"providerConfigRef": map[string]any{
					"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": "team-a",
				},
			}},
			sources: []string{
				"spec.bootstrap: Machine alpha-md-0-abc's bootstrap data secret alpha-md-0-abc",
				"spec.failureDomain: Machine.spec.failureDomain",
				"spec.network.networkID: CrossplaneCluster alpha's status.outputs.network",
				"spec.network.region: CrossplaneCluster alpha's spec.parameters.region",
				"spec.network.securityGroupIDs: CrossplaneCluster alpha's status.outputs.network",
				"spec.network.subnetID: CrossplaneCluster alpha's status.outputs.network",
				"spec.providerConfigRef: CrossplaneCluster alpha's spec.providerConfigRef",
			},
		},
		"OpenControlPlaneKeepsOwnCredentials": {
			reason: "a control-plane machine also joins the control-plane group; a machine naming its own credentials keeps them",
			in: Inputs{Machine: machine("cp-0", "eu-west-1b", true), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"providerConfigRef": map[string]any{"name": "own"}}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"bootstrap":     map[string]any{"dataSecretRef": map[string]any{"name": "cp-0", "key": "value"}},
				"failureDomain": "eu-west-1b",
				"network":       map[string]any{"region": "eu-west-1", "networkID": "vpc-1", "subnetID": "subnet-priv-b", "securityGroupIDs": []any{"sg-cp", "sg-node"}},
			}},
		},
		"OpenWithoutNetworkOutputs": {
			reason: "backends without a network (local, some bring-your-own) inject only what exists",
			in:     Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: u(map[string]any{}), XR: u(map[string]any{})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}},
			}},
		},
		"UnknownFailureDomain": {
			reason: "a failure domain the cluster does not have is refused, naming the ones it has",
			in:     Inputs{Machine: machine("boot", "us-east-1a", false), Cluster: cluster(true), ClusterXR: awsClusterXR, XR: u(map[string]any{})},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidFailureDomainReason,
				Message: `Machine.spec.failureDomain "us-east-1a" is not one of the cluster's failure domains: eu-west-1a, eu-west-1b`}},
		},
		"AlreadyInjected": {
			reason: "once opened, the gate stays open and injects nothing again, even if the cluster's failure domains change",
			in: Inputs{Machine: machine("boot", "eu-west-1c", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{
					"bootstrap":         map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}},
					"failureDomain":     "eu-west-1c",
					"network":           map[string]any{"region": "eu-west-1"},
					"providerConfigRef": map[string]any{"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": "team-a"},
				}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}},
		},
		"PresetDataSecretRefOfAnotherMachine": {
			reason: "a dataSecretRef preset in a template must not boot the machine from someone else's bootstrap data",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "other-cluster-boot", "key": "value"}}}})},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidBootstrapDataRefReason,
				Message: "spec.bootstrap.dataSecretRef other-cluster-boot/value is set by the bridge, not preset: Machine alpha-md-0-abc's bootstrap data is boot/value; recreate the machine without it"}},
		},
		"PresetDataSecretRefBeforeBootstrapData": {
			reason: "a preset dataSecretRef never skips the wait for the Machine's bootstrap data",
			in: Inputs{Machine: machine("", "", false), Cluster: cluster(false), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}}}})},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidBootstrapDataRefReason,
				Message: "spec.bootstrap.dataSecretRef boot/value is set by the bridge, not preset: Machine alpha-md-0-abc has no bootstrap data secret yet; recreate the machine without it"}},
		},
		"PresetMatchingDataSecretRefStillInjects": {
			reason: "a preset dataSecretRef that happens to be right does not skip the injection of the network and credentials",
			in: Inputs{Machine: machine("boot", "eu-west-1b", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}}}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"failureDomain":     "eu-west-1b",
				"network":           map[string]any{"region": "eu-west-1", "networkID": "vpc-1", "subnetID": "subnet-priv-b", "securityGroupIDs": []any{"sg-node"}},
				"providerConfigRef": map[string]any{"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": "team-a"},
			}},
		},
		"PresetFailureDomainDiffers": {
			reason: "the machine is placed where CAPI placed its Machine, not where a template says",
			in: Inputs{Machine: machine("boot", "eu-west-1a", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"failureDomain": "eu-west-1b"}})},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidFailureDomainReason,
				Message: `spec.failureDomain "eu-west-1b" differs from Machine.spec.failureDomain "eu-west-1a", where CAPI placed the machine`}},
		},
		"ExistingHostPlacesTheMachine": {
			reason: "a Machine in no failure domain, for a host that exists in one, gets that zone's subnet; its spec.failureDomain stays CAPI's to give",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"parameters": map[string]any{"host": map[string]any{"providerID": "byo://h", "failureDomain": "eu-west-1b"}}}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"bootstrap":         map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}},
				"network":           map[string]any{"region": "eu-west-1", "networkID": "vpc-1", "subnetID": "subnet-priv-b", "securityGroupIDs": []any{"sg-node"}},
				"providerConfigRef": map[string]any{"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": "team-a"},
			}},
		},
		"ExistingHostElsewhere": {
			reason: "CAPI cannot place a Machine in another failure domain than its existing host's",
			in: Inputs{Machine: machine("boot", "eu-west-1a", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"parameters": map[string]any{"host": map[string]any{"providerID": "byo://h", "failureDomain": "eu-west-1b"}}}})},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidFailureDomainReason,
				Message: `Machine.spec.failureDomain "eu-west-1a" is not where the existing host is (spec.parameters.host.failureDomain "eu-west-1b"): place the Machine in "eu-west-1b" or in no failure domain`}},
		},
		"ExistingHostInAnUnknownFailureDomain": {
			reason: "an existing host's failure domain must be one of the cluster's, and the message names the host's field",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"parameters": map[string]any{"host": map[string]any{"providerID": "byo://h", "failureDomain": "rack-9"}}}})},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidFailureDomainReason,
				Message: `spec.parameters.host.failureDomain "rack-9" is not one of the cluster's failure domains: eu-west-1a, eu-west-1b`}},
		},
		"TemplateNetworkCompletedByTheCluster": {
			reason: "a machine template's own region and subnet are kept; what it lacks comes from the cluster's outputs, each field saying where from",
			in: Inputs{Machine: machine("boot", "eu-west-1a", false), Cluster: cluster(true), ClusterXR: awsClusterXR,
				XR: u(map[string]any{"spec": map[string]any{"network": map[string]any{"region": "eu-west-3", "subnetID": "subnet-own"}}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"bootstrap":         map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}},
				"failureDomain":     "eu-west-1a",
				"network":           map[string]any{"networkID": "vpc-1", "securityGroupIDs": []any{"sg-node"}},
				"providerConfigRef": map[string]any{"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": "team-a"},
			}},
			sources: []string{
				"spec.bootstrap: Machine alpha-md-0-abc's bootstrap data secret boot",
				"spec.failureDomain: Machine.spec.failureDomain",
				"spec.network.networkID: CrossplaneCluster alpha's status.outputs.network",
				"spec.network.region: the machine's own spec",
				"spec.network.securityGroupIDs: CrossplaneCluster alpha's status.outputs.network",
				"spec.network.subnetID: the machine's own spec",
				"spec.providerConfigRef: CrossplaneCluster alpha's spec.providerConfigRef",
			},
		},
		"ExternallyManagedClusterWithoutOutputs": {
			reason: "under an InfraCluster that reports no network and names no credentials, the machine's own network and credentials are all it gets",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(true),
				ClusterXR: u(map[string]any{"kind": "ExternalCluster", "metadata": map[string]any{"name": "legacy"}}),
				XR: u(map[string]any{"spec": map[string]any{
					"network":           map[string]any{"region": "eu-west-3", "subnetID": "subnet-own", "securityGroupIDs": []any{"sg-own"}},
					"providerConfigRef": map[string]any{"name": "own"},
				}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}},
			}},
			sources: []string{
				"spec.bootstrap: Machine alpha-md-0-abc's bootstrap data secret boot",
				"spec.network.region: the machine's own spec",
				"spec.network.securityGroupIDs: the machine's own spec",
				"spec.network.subnetID: the machine's own spec",
				"spec.providerConfigRef: the machine's own spec",
			},
		},
		"ProviderIDKnownBeforeComposing": {
			reason: "a Composition that declares its provider ID gets it in the gate's injection, so the XR gets no new generation once Ready",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: u(map[string]any{}),
				XR:         u(map[string]any{"metadata": map[string]any{"namespace": "team-a", "name": "alpha-md-0-abc"}}),
				ProviderID: "capxp-local:///{metadata.namespace}/{metadata.name}", ProviderIDFrom: "Composition crossplanemachine-local"},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"bootstrap":  map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}},
				"providerID": "capxp-local:///team-a/alpha-md-0-abc",
			}},
			sources: []string{
				"spec.bootstrap: Machine alpha-md-0-abc's bootstrap data secret boot",
				"spec.providerID: Composition crossplanemachine-local's capxp.dev/provider-id annotation",
			},
		},
		"ProviderIDTemplateNamesAMissingField": {
			reason: "a template naming a field the XR lacks keeps the gate closed, naming the Composition and the field",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: u(map[string]any{}), XR: u(map[string]any{}),
				ProviderID: "{spec.parameters.host.providerID}", ProviderIDFrom: "Composition crossplanemachine-byo"},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidOutputsReason,
				Message: `Composition crossplanemachine-byo's capxp.dev/provider-id annotation: "{spec.parameters.host.providerID}" names spec.parameters.host.providerID, which the XR does not set to a string`}},
		},
		"ProviderIDPresetIsRefused": {
			reason: "a provider ID preset before the gate opens could name another namespace's machine: the gate stays closed, whatever the Composition declares",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: u(map[string]any{}),
				XR:         u(map[string]any{"spec": map[string]any{"providerID": "capxp-local:///team-b/their-machine"}}),
				ProviderID: "capxp-local:///{metadata.namespace}/{metadata.name}", ProviderIDFrom: "Composition c"},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidProviderIDReason,
				Message: `spec.providerID "capxp-local:///team-b/their-machine" is set by the bridge, not preset: a machine's provider ID is the one its Composition declares or reports; recreate the machine without it`}},
		},
		"ProviderIDPresetRefusedWithoutDeclaration": {
			reason: "a Composition that reports its provider ID does not make a preset one the machine's",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(false), ClusterXR: u(map[string]any{}),
				XR: u(map[string]any{"spec": map[string]any{"providerID": "aws:///eu-west-1a/i-0123"}})},
			want: Decision{Verdict: verdict.Verdict{Reason: infrav1.InvalidProviderIDReason,
				Message: `spec.providerID "aws:///eu-west-1a/i-0123" is set by the bridge, not preset: a machine's provider ID is the one its Composition declares or reports; recreate the machine without it`}},
		},
		"ProviderIDKeptOnceInjected": {
			reason: "the provider ID the gate injected with the bootstrap reference stays, and keeps the gate open",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: u(map[string]any{}),
				XR: u(map[string]any{"metadata": map[string]any{"name": "m"}, "spec": map[string]any{"providerID": "x:///m",
					"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}}}}),
				ProviderID: "x:///{metadata.name}", ProviderIDFrom: "Composition c"},
			want: Decision{Verdict: verdict.Verdict{Ready: true}},
		},
		"ProviderIDNotAfterComposing": {
			reason: "a machine composed before its Composition declared a provider ID has that Composition's report, not the template's",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: u(map[string]any{}),
				XR: u(map[string]any{"metadata": map[string]any{"name": "m"}, "spec": map[string]any{
					"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}}}}),
				ProviderID: "x:///{metadata.name}", ProviderIDFrom: "Composition c"},
			want: Decision{Verdict: verdict.Verdict{Ready: true}},
		},
		"MachineOwnCredentialsKept": {
			reason: "a machine naming its own credentials keeps them (the credentials check judges them)",
			in: Inputs{Machine: machine("boot", "", false), Cluster: cluster(true), ClusterXR: u(map[string]any{"spec": map[string]any{"providerConfigRef": map[string]any{"name": "cluster-creds"}}}),
				XR: u(map[string]any{"spec": map[string]any{"providerConfigRef": map[string]any{"name": "own"}}})},
			want: Decision{Verdict: verdict.Verdict{Ready: true}, Spec: map[string]any{
				"bootstrap": map[string]any{"dataSecretRef": map[string]any{"name": "boot", "key": "value"}},
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Decide(tc.in)
			tc.want.Sources = tc.sources
			if tc.sources == nil {
				got.Sources = nil
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nDecide(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestProviderID(t *testing.T) {
	xr := u(map[string]any{
		"metadata": map[string]any{"namespace": "team-a", "name": "m-1"},
		"spec": map[string]any{
			"parameters": map[string]any{"host": map[string]any{"providerID": "byo://rack-1/h-7"}, "size": int64(3)},
		},
	})
	cases := map[string]struct {
		reason   string
		template string
		want     string
		err      string
	}{
		"NamespaceAndName":  {reason: "fields in braces are replaced", template: "capxp-local:///{metadata.namespace}/{metadata.name}", want: "capxp-local:///team-a/m-1"},
		"WholeField":        {reason: "a template may be one field", template: "{spec.parameters.host.providerID}", want: "byo://rack-1/h-7"},
		"NoFields":          {reason: "a constant is a template too, if a provider ID", template: "static://x", want: "static://x"},
		"Missing":           {reason: "a field the XR lacks", template: "x:///{spec.parameters.image}", err: `"x:///{spec.parameters.image}" names spec.parameters.image, which the XR does not set to a string`},
		"NotAString":        {reason: "a field that is not a string", template: "x:///{spec.parameters.size}", err: `"x:///{spec.parameters.size}" names spec.parameters.size, which the XR does not set to a string`},
		"Unclosed":          {reason: "an unclosed brace", template: "x:///{metadata.name", err: `"x:///{metadata.name" has a { that is not closed`},
		"Nested":            {reason: "a brace inside braces", template: "x:///{meta{data}}", err: `"x:///{meta{data}}" has a { that is not closed`},
		"StrayClose":        {reason: "a closing brace alone", template: "x:///}", err: `"x:///}" has a } that closes no {`},
		"Empty":             {reason: "empty braces", template: "x:///{}", err: `"x:///{}" names {}, which is not a field path`},
		"NotAPath":          {reason: "braces around something that is not a field path", template: "x:///{spec[}", err: `"x:///{spec[}" names {spec[}, which is not a field path`},
		"NotAProviderID":    {reason: "the result must be <scheme>://<id>", template: "{metadata.name}", err: `"{metadata.name}" gives "m-1", which is not of the form <scheme>://<id>`},
		"NothingAfterColon": {reason: "an empty id part", template: "x://", err: `"x://" gives "x://", which is not of the form <scheme>://<id>`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ProviderID(tc.template, xr)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if got != tc.want || gotErr != tc.err {
				t.Errorf("%s\nProviderID(%q) = %q, %q; want %q, %q", tc.reason, tc.template, got, gotErr, tc.want, tc.err)
			}
		})
	}
}
