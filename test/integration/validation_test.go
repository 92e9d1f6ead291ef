package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

func validCluster() *infrav1.CrossplaneCluster {
	return &infrav1.CrossplaneCluster{
		Spec: infrav1.CrossplaneClusterSpec{
			Parameters: infrav1.CrossplaneClusterParameters{
				Region: "eu-west-1",
				Network: infrav1.NetworkParameters{
					CIDRBlock: "10.0.0.0/16",
					Subnets: []infrav1.SubnetParameters{
						{CIDRBlock: "10.0.1.0/24", FailureDomain: "eu-west-1a"},
						{ID: "subnet-0123", FailureDomain: "eu-west-1b", Role: infrav1.SubnetRolePublic},
					},
				},
				FailureDomains: []infrav1.FailureDomainParameters{{Name: "eu-west-1a"}, {Name: "eu-west-1b"}},
				ControlPlaneLoadBalancer: infrav1.LoadBalancerParameters{
					Scheme: infrav1.LoadBalancerSchemeInternal, Port: 443,
				},
			},
			ProviderConfigRef: &infrav1.ProviderConfigReference{
				APIGroup: "aws.m.upbound.io", Kind: infrav1.ProviderConfigKindNamespaced, Name: "team-a",
			},
		},
	}
}

func validMachine() *infrav1.CrossplaneMachine {
	return &infrav1.CrossplaneMachine{
		Spec: infrav1.CrossplaneMachineSpec{
			Parameters: infrav1.CrossplaneMachineParameters{
				Size:       "m6i.large",
				RootVolume: infrav1.RootVolumeParameters{SizeGiB: 40},
			},
		},
	}
}

// Bad input is refused by the API server with a message naming the field,
// whether at creation or, for fields CAPI never changes in place, on update.
func TestInvalidSpecsAreRejected(t *testing.T) {
	cases := map[string]struct {
		reason string
		// create is created as is; when update is set, create must succeed and
		// update is then applied to the stored object.
		create client.Object
		update func(client.Object)
		// want are substrings of the API server's message.
		want []string
	}{
		"LoadBalancerPortTooHigh": {
			reason: "ports are 1-65535",
			create: func() client.Object {
				c := validCluster()
				c.Spec.Parameters.ControlPlaneLoadBalancer.Port = 65536
				return c
			}(),
			want: []string{"spec.parameters.controlPlaneLoadBalancer.port", "65535"},
		},
		"LoadBalancerPortNegative": {
			reason: "ports are 1-65535",
			create: func() client.Object {
				c := validCluster()
				c.Spec.Parameters.ControlPlaneLoadBalancer.Port = -1
				return c
			}(),
			want: []string{"spec.parameters.controlPlaneLoadBalancer.port", "greater than or equal to 1"},
		},
		"LoadBalancerSchemeUnknown": {
			reason: "the scheme is an enum",
			create: func() client.Object {
				c := validCluster()
				c.Spec.Parameters.ControlPlaneLoadBalancer.Scheme = "Public"
				return c
			}(),
			want: []string{"spec.parameters.controlPlaneLoadBalancer.scheme", `supported values: "InternetFacing", "Internal"`},
		},
		"EndpointPortOutOfRange": {
			reason: "a user-provided endpoint is validated like any port",
			create: func() client.Object {
				c := validCluster()
				c.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "api.example.org", Port: 70000}
				return c
			}(),
			want: []string{"spec.controlPlaneEndpoint.port"},
		},
		"EndpointHostWithoutPort": {
			reason: "an endpoint is a host and a port",
			create: func() client.Object {
				c := validCluster()
				c.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "api.example.org"}
				return c
			}(),
			want: []string{"spec.controlPlaneEndpoint", "host and port must be set together"},
		},
		"EndpointChangedOnceSet": {
			reason: "CAPI never moves a cluster's endpoint",
			create: func() client.Object {
				c := validCluster()
				c.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "api.example.org", Port: 6443}
				return c
			}(),
			update: func(o client.Object) {
				o.(*infrav1.CrossplaneCluster).Spec.ControlPlaneEndpoint.Host = "other.example.org"
			},
			want: []string{"spec", "controlPlaneEndpoint is immutable once set"},
		},
		"ProviderConfigKindUnknown": {
			reason: "credentials are a ProviderConfig or a ClusterProviderConfig",
			create: func() client.Object {
				c := validCluster()
				c.Spec.ProviderConfigRef.Kind = "Secret"
				return c
			}(),
			want: []string{"spec.providerConfigRef.kind", `supported values: "ProviderConfig", "ClusterProviderConfig"`},
		},
		"ProviderConfigNameMissing": {
			reason: "a reference needs a name",
			create: func() client.Object {
				c := validCluster()
				c.Spec.ProviderConfigRef.Name = ""
				return c
			}(),
			want: []string{"spec.providerConfigRef.name"},
		},
		"ProviderConfigGroupMalformed": {
			reason: "the API group is a DNS subdomain",
			create: func() client.Object {
				c := validCluster()
				c.Spec.ProviderConfigRef.APIGroup = "AWS Provider"
				return c
			}(),
			want: []string{"spec.providerConfigRef.apiGroup"},
		},
		"NetworkCIDRMalformed": {
			reason: "CIDR blocks are checked",
			create: func() client.Object {
				c := validCluster()
				c.Spec.Parameters.Network.CIDRBlock = "10.0.0.0/33"
				return c
			}(),
			want: []string{"spec.parameters.network.cidrBlock", "must be a CIDR block"},
		},
		"SubnetWithoutIDOrCIDR": {
			reason: "a subnet is either existing or to be created",
			create: func() client.Object {
				c := validCluster()
				c.Spec.Parameters.Network.Subnets = []infrav1.SubnetParameters{{FailureDomain: "eu-west-1a"}}
				return c
			}(),
			want: []string{"spec.parameters.network.subnets[0]", "a subnet needs an id"},
		},
		"SubnetIDsDuplicated": {
			reason: "an existing subnet is listed once",
			create: func() client.Object {
				c := validCluster()
				c.Spec.Parameters.Network.Subnets = []infrav1.SubnetParameters{
					{ID: "subnet-1", FailureDomain: "a"}, {ID: "subnet-1", FailureDomain: "b"},
				}
				return c
			}(),
			want: []string{"spec.parameters.network.subnets", "subnet ids must be unique"},
		},
		"FailureDomainsDuplicated": {
			reason: "failure domains are keyed by name",
			create: func() client.Object {
				c := validCluster()
				c.Spec.Parameters.FailureDomains = []infrav1.FailureDomainParameters{{Name: "a"}, {Name: "a", ControlPlane: ptr.To(false)}}
				return c
			}(),
			want: []string{"spec.parameters.failureDomains[1]", "Duplicate value"},
		},
		"MachineSizeMissing": {
			reason: "a machine needs a size",
			create: func() client.Object {
				m := validMachine()
				m.Spec.Parameters.Size = ""
				return m
			}(),
			want: []string{"spec.parameters.size"},
		},
		"MachineRootVolumeTooSmall": {
			reason: "root volumes have a minimum size",
			create: func() client.Object {
				m := validMachine()
				m.Spec.Parameters.RootVolume.SizeGiB = 4
				return m
			}(),
			want: []string{"spec.parameters.rootVolume.sizeGiB", "greater than or equal to 8"},
		},
		"MachineBootstrapSecretNameEmpty": {
			reason: "a secret reference needs a name",
			create: func() client.Object {
				m := validMachine()
				m.Spec.Bootstrap.DataSecretRef = &infrav1.SecretKeyReference{Key: "value"}
				return m
			}(),
			want: []string{"spec.bootstrap.dataSecretRef.name"},
		},
		"MachineParametersChanged": {
			reason: "CAPI replaces machines; it never resizes them in place",
			create: validMachine(),
			update: func(o client.Object) {
				o.(*infrav1.CrossplaneMachine).Spec.Parameters.Size = "m6i.xlarge"
			},
			want: []string{"spec.parameters", "parameters are immutable"},
		},
		"MachineProviderIDChanged": {
			reason: "a machine's identity never changes",
			create: func() client.Object {
				m := validMachine()
				m.Spec.ProviderID = "aws:///eu-west-1a/i-0123"
				return m
			}(),
			update: func(o client.Object) {
				o.(*infrav1.CrossplaneMachine).Spec.ProviderID = "aws:///eu-west-1a/i-4567"
			},
			want: []string{"spec", "providerID is immutable once set"},
		},
		"MachineBootstrapSecretChanged": {
			reason: "bootstrap data is consumed once",
			create: func() client.Object {
				m := validMachine()
				m.Spec.Bootstrap.DataSecretRef = &infrav1.SecretKeyReference{Name: "alpha-md-0-abc", Key: "value"}
				return m
			}(),
			update: func(o client.Object) {
				o.(*infrav1.CrossplaneMachine).Spec.Bootstrap.DataSecretRef.Name = "other"
			},
			want: []string{"spec.bootstrap.dataSecretRef", "immutable once set"},
		},
		"MachineTemplateChanged": {
			reason: "templates are immutable; a new one rolls the machines",
			create: &infrav1.CrossplaneMachineTemplate{Spec: infrav1.CrossplaneMachineTemplateSpec{
				Template: infrav1.CrossplaneMachineTemplateResource{Spec: validMachine().Spec},
			}},
			update: func(o client.Object) {
				o.(*infrav1.CrossplaneMachineTemplate).Spec.Template.Spec.Parameters.Image = "ami-1"
			},
			want: []string{"spec", "CrossplaneMachineTemplate spec is immutable"},
		},
		"ClusterTemplateInvalidPort": {
			reason: "templates validate what they stamp out",
			create: &infrav1.CrossplaneClusterTemplate{Spec: infrav1.CrossplaneClusterTemplateSpec{
				Template: infrav1.CrossplaneClusterTemplateResource{Spec: infrav1.CrossplaneClusterSpec{
					Parameters: infrav1.CrossplaneClusterParameters{ControlPlaneLoadBalancer: infrav1.LoadBalancerParameters{Port: 99999}},
				}},
			}},
			want: []string{"spec.template.spec.parameters.controlPlaneLoadBalancer.port"},
		},
	}

	ns := namespace(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			obj := tc.create.DeepCopyObject().(client.Object)
			obj.SetNamespace(ns)
			obj.SetName(nameOf(name))

			err := env.Client.Create(ctx, obj)
			if tc.update != nil {
				g.Expect(err).NotTo(HaveOccurred(), "the object before the update must be valid")
				// Crossplane writes XRs several times as soon as they
				// exist: update what is stored, as kubectl edit would,
				// for as long as that burst lasts.
				burst := wait.Backoff{Steps: 30, Duration: 50 * time.Millisecond, Factor: 1.2, Jitter: 0.1, Cap: time.Second}
				err = retry.RetryOnConflict(burst, func() error {
					if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
						return err
					}
					tc.update(obj)
					return env.Client.Update(ctx, obj)
				})
			}
			g.Expect(err).To(HaveOccurred(), tc.reason)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w), tc.reason)
			}
		})
	}
}

// The valid objects the table starts from are accepted, and defaults apply.
func TestValidSpecsAreAcceptedWithDefaults(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)

	c := validCluster()
	c.Namespace, c.Name = ns, "valid"
	c.Spec.Parameters.ControlPlaneLoadBalancer = infrav1.LoadBalancerParameters{}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Expect(c.Spec.Parameters.ControlPlaneLoadBalancer.Port).To(BeEquivalentTo(6443))
	g.Expect(c.Spec.Parameters.ControlPlaneLoadBalancer.Scheme).To(Equal(infrav1.LoadBalancerSchemeInternetFacing))
	g.Expect(c.Spec.Parameters.Network.Subnets[0].Role).To(Equal(infrav1.SubnetRolePrivate))
	g.Expect(*c.Spec.Parameters.FailureDomains[0].ControlPlane).To(BeTrue())

	m := validMachine()
	m.Namespace, m.Name = ns, "valid"
	m.Spec.Bootstrap.DataSecretRef = &infrav1.SecretKeyReference{Name: "bootstrap"}
	g.Expect(env.Client.Create(ctx, m)).To(Succeed())
	g.Expect(m.Spec.Bootstrap.DataSecretRef.Key).To(Equal("value"))

	// Fields the bridge writes later are writable once.
	change(g, m, func() {
		m.Spec.ProviderID = "aws:///eu-west-1a/i-0123"
		m.Spec.FailureDomain = "eu-west-1a"
		m.Spec.Network = infrav1.MachineNetwork{SubnetID: "subnet-1", SecurityGroupIDs: []string{"sg-1"}}
	})

	stored := &infrav1.CrossplaneMachine{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(m), stored)).To(Succeed())
	g.Expect(stored.Spec.ProviderID).To(Equal("aws:///eu-west-1a/i-0123"))
}

// nameOf turns a case name into an object name.
func nameOf(s string) string {
	out := make([]rune, 0, len(s)+8)
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				out = append(out, '-')
			}
			r += 'a' - 'A'
		}
		out = append(out, r)
	}
	return string(out)
}
