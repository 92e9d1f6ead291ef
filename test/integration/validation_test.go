package integration

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/policies"
)

// validCluster is a CrossplaneCluster the API server admits, changed by
// mutate.
func validCluster(mutate ...func(*infrav1.CrossplaneCluster)) *infrav1.CrossplaneCluster {
	c := &infrav1.CrossplaneCluster{
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
	for _, f := range mutate {
		f(c)
	}
	return c
}

// validGrant is a grant by name and by selector, changed by mutate.
func validGrant(mutate func(*infrav1.ClusterProviderConfigGrant)) *infrav1.ClusterProviderConfigGrant {
	g := &infrav1.ClusterProviderConfigGrant{Spec: infrav1.ClusterProviderConfigGrantSpec{
		ProviderConfigRef: &infrav1.ClusterProviderConfigReference{APIGroup: "aws.m.upbound.io", Name: "shared"},
		AllowedNamespaces: infrav1.AllowedNamespaces{
			Names: []string{"team-a"},
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tenant", Operator: metav1.LabelSelectorOpIn, Values: []string{"gold"}},
			}},
		},
	}}
	if mutate != nil {
		mutate(g)
	}
	return g
}

// validMachine is a CrossplaneMachine the API server admits, changed by
// mutate.
func validMachine(mutate ...func(*infrav1.CrossplaneMachine)) *infrav1.CrossplaneMachine {
	m := &infrav1.CrossplaneMachine{
		Spec: infrav1.CrossplaneMachineSpec{
			Parameters: infrav1.CrossplaneMachineParameters{
				Size:       "m6i.large",
				RootVolume: infrav1.RootVolumeParameters{SizeGiB: 40},
			},
		},
	}
	for _, f := range mutate {
		f(m)
	}
	return m
}

// Bad input is refused by the API server with a message naming the field,
// whether at creation or, for fields CAPI never changes in place, on update.
func TestInvalidSpecsAreRejected(t *testing.T) {
	type invalid struct {
		reason string
		// create is created as is; when update is set, create must succeed and
		// update is then applied to the stored object.
		create client.Object
		update func(client.Object)
		// want are substrings of the API server's message.
		want []string
	}
	cases := map[string]invalid{
		"LoadBalancerPortTooHigh": {
			reason: "ports are 1-65535",
			create: validCluster(func(c *infrav1.CrossplaneCluster) { c.Spec.Parameters.ControlPlaneLoadBalancer.Port = 65536 }),
			want:   []string{"spec.parameters.controlPlaneLoadBalancer.port", "65535"},
		},
		"LoadBalancerPortNegative": {
			reason: "ports are 1-65535",
			create: validCluster(func(c *infrav1.CrossplaneCluster) { c.Spec.Parameters.ControlPlaneLoadBalancer.Port = -1 }),
			want:   []string{"spec.parameters.controlPlaneLoadBalancer.port", "greater than or equal to 1"},
		},
		"LoadBalancerSchemeUnknown": {
			reason: "the scheme is an enum",
			create: validCluster(func(c *infrav1.CrossplaneCluster) { c.Spec.Parameters.ControlPlaneLoadBalancer.Scheme = "Public" }),
			want:   []string{"spec.parameters.controlPlaneLoadBalancer.scheme", `supported values: "InternetFacing", "Internal"`},
		},
		"EndpointPortOutOfRange": {
			reason: "a user-provided endpoint is validated like any port",
			create: validCluster(func(c *infrav1.CrossplaneCluster) {
				c.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "api.example.org", Port: 70000}
			}),
			want: []string{"spec.controlPlaneEndpoint.port"},
		},
		"EndpointHostWithoutPort": {
			reason: "an endpoint is a host and a port",
			create: validCluster(func(c *infrav1.CrossplaneCluster) {
				c.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "api.example.org"}
			}),
			want: []string{"spec.controlPlaneEndpoint", "host and port must be set together"},
		},
		"EndpointChangedOnceSet": {
			reason: "CAPI never moves a cluster's endpoint",
			create: validCluster(func(c *infrav1.CrossplaneCluster) {
				c.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "api.example.org", Port: 6443}
			}),
			update: func(o client.Object) {
				o.(*infrav1.CrossplaneCluster).Spec.ControlPlaneEndpoint.Host = "other.example.org"
			},
			want: []string{"spec", "controlPlaneEndpoint is immutable once set"},
		},
		"ProviderConfigKindUnknown": {
			reason: "credentials are a ProviderConfig or a ClusterProviderConfig",
			create: validCluster(func(c *infrav1.CrossplaneCluster) { c.Spec.ProviderConfigRef.Kind = "Secret" }),
			want:   []string{"spec.providerConfigRef.kind", `supported values: "ProviderConfig", "ClusterProviderConfig"`},
		},
		"NetworkCIDRMalformed": {
			reason: "CIDR blocks are checked",
			create: validCluster(func(c *infrav1.CrossplaneCluster) { c.Spec.Parameters.Network.CIDRBlock = "10.0.0.0/33" }),
			want:   []string{"spec.parameters.network.cidrBlock", "must be a CIDR block"},
		},
		"SubnetWithoutIDOrCIDR": {
			reason: "a subnet is either existing or to be created",
			create: validCluster(func(c *infrav1.CrossplaneCluster) {
				c.Spec.Parameters.Network.Subnets = []infrav1.SubnetParameters{{FailureDomain: "eu-west-1a"}}
			}),
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
			create: validCluster(func(c *infrav1.CrossplaneCluster) {
				c.Spec.Parameters.FailureDomains = []infrav1.FailureDomainParameters{{Name: "a"}, {Name: "a", ControlPlane: ptr.To(false)}}
			}),
			want: []string{"spec.parameters.failureDomains[1]", "Duplicate value"},
		},
		"MachineSizeMissing": {
			reason: "a machine needs a size",
			create: validMachine(func(m *infrav1.CrossplaneMachine) { m.Spec.Parameters.Size = "" }),
			want:   []string{"spec.parameters.size"},
		},
		"MachineRootVolumeTooSmall": {
			reason: "root volumes have a minimum size",
			create: validMachine(func(m *infrav1.CrossplaneMachine) { m.Spec.Parameters.RootVolume.SizeGiB = 4 }),
			want:   []string{"spec.parameters.rootVolume.sizeGiB", "greater than or equal to 8"},
		},
		"MachineBootstrapSecretNameEmpty": {
			reason: "a secret reference needs a name",
			create: validMachine(func(m *infrav1.CrossplaneMachine) {
				m.Spec.Bootstrap.DataSecretRef = &infrav1.SecretKeyReference{Key: "value"}
			}),
			want: []string{"spec.bootstrap.dataSecretRef.name"},
		},
		"MachineProviderIDChanged": {
			reason: "a machine's identity never changes",
			create: validMachine(func(m *infrav1.CrossplaneMachine) { m.Spec.ProviderID = "aws:///eu-west-1a/i-0123" }),
			update: func(o client.Object) {
				o.(*infrav1.CrossplaneMachine).Spec.ProviderID = "aws:///eu-west-1a/i-4567"
			},
			want: []string{"spec", "providerID is immutable once set"},
		},
		"MachineBootstrapSecretChanged": {
			reason: "bootstrap data is consumed once",
			create: validMachine(func(m *infrav1.CrossplaneMachine) {
				m.Spec.Bootstrap.DataSecretRef = &infrav1.SecretKeyReference{Name: "alpha-md-0-abc", Key: "value"}
			}),
			update: func(o client.Object) {
				o.(*infrav1.CrossplaneMachine).Spec.Bootstrap.DataSecretRef.Name = "other"
			},
			want: []string{"spec.bootstrap.dataSecretRef", "immutable once set"},
		},
		"MachineTemplateSizeMissing": {
			reason: "templates validate the machines they stamp out",
			create: &infrav1.CrossplaneMachineTemplate{Spec: infrav1.CrossplaneMachineTemplateSpec{
				Template: infrav1.CrossplaneMachineTemplateResource{Spec: infrav1.CrossplaneMachineSpec{}},
			}},
			want: []string{"spec.template.spec.parameters.size"},
		},
		"MachineTemplatePresetProviderID": {
			reason: "a template stamps out many machines; one provider ID cannot be theirs",
			create: func() client.Object {
				m := validMachine()
				m.Spec.ProviderID = "aws:///eu-west-1a/i-0123"
				return &infrav1.CrossplaneMachineTemplate{Spec: infrav1.CrossplaneMachineTemplateSpec{
					Template: infrav1.CrossplaneMachineTemplateResource{Spec: m.Spec},
				}}
			}(),
			want: []string{"spec.template.spec", "providerID is written per machine by the bridge"},
		},
		"MachineTemplatePresetBootstrapRef": {
			reason: "every machine boots from its own Machine's bootstrap data",
			create: func() client.Object {
				m := validMachine()
				m.Spec.Bootstrap.DataSecretRef = &infrav1.SecretKeyReference{Name: "someone-elses"}
				return &infrav1.CrossplaneMachineTemplate{Spec: infrav1.CrossplaneMachineTemplateSpec{
					Template: infrav1.CrossplaneMachineTemplateResource{Spec: m.Spec},
				}}
			}(),
			want: []string{"spec.template.spec", "bootstrap.dataSecretRef is injected per machine"},
		},
		"MachinePoolTemplatePresetProviderIDList": {
			reason: "a pool's machines are its own; a template cannot name them",
			create: &infrav1.CrossplaneMachinePoolTemplate{Spec: infrav1.CrossplaneMachinePoolTemplateSpec{
				Template: infrav1.CrossplaneMachinePoolTemplateResource{Spec: infrav1.CrossplaneMachinePoolSpec{
					Parameters: infrav1.MachinePoolParameters{Size: "small"}, ProviderIDList: []string{"aws:///eu-west-1a/i-0123"}}},
			}},
			want: []string{"spec.template.spec", "providerIDList is written per pool by the bridge"},
		},
		"MachinePoolTemplatePresetBootstrapRef": {
			reason: "a pool boots from its own MachinePool's bootstrap data",
			create: &infrav1.CrossplaneMachinePoolTemplate{Spec: infrav1.CrossplaneMachinePoolTemplateSpec{
				Template: infrav1.CrossplaneMachinePoolTemplateResource{Spec: infrav1.CrossplaneMachinePoolSpec{
					Parameters: infrav1.MachinePoolParameters{Size: "small"},
					Bootstrap:  infrav1.MachinePoolBootstrap{DataSecretRef: &infrav1.SecretKeyReference{Name: "someone-elses"}}}},
			}},
			want: []string{"spec.template.spec", "bootstrap.dataSecretRef is injected per pool"},
		},
		"ControlPlaneTemplatePresetVersion": {
			reason: "the control plane runs the Cluster's version, which CAPI's topology controller writes",
			create: &infrav1.CrossplaneControlPlaneTemplate{Spec: infrav1.CrossplaneControlPlaneTemplateSpec{
				Template: infrav1.CrossplaneControlPlaneTemplateResource{Spec: infrav1.CrossplaneControlPlaneSpec{Version: "v1.36.5"}},
			}},
			want: []string{"spec.template.spec", "version is written by CAPI's topology controller"},
		},
		"ControlPlaneTemplatePresetEndpoint": {
			reason: "the endpoint is where the service serves, which only the service knows",
			create: &infrav1.CrossplaneControlPlaneTemplate{Spec: infrav1.CrossplaneControlPlaneTemplateSpec{
				Template: infrav1.CrossplaneControlPlaneTemplateResource{Spec: infrav1.CrossplaneControlPlaneSpec{
					ControlPlaneEndpoint: infrav1.APIEndpoint{Host: "api.example.org", Port: 443}}},
			}},
			want: []string{"spec.template.spec", "controlPlaneEndpoint is written by the bridge"},
		},
		"MachineSizeNorHost": {
			reason: "a machine is either made (its size) or already exists (its host)",
			create: &infrav1.CrossplaneMachine{Spec: infrav1.CrossplaneMachineSpec{Parameters: infrav1.CrossplaneMachineParameters{Image: "ami-1"}}},
			want:   []string{"spec.parameters.size", "required, unless host names a host that already exists"},
		},
		"HostProviderIDWithoutScheme": {
			reason: "an existing host's providerID has the <scheme>:// form its Node reports",
			create: &infrav1.CrossplaneMachine{Spec: infrav1.CrossplaneMachineSpec{Parameters: infrav1.CrossplaneMachineParameters{
				Host: &infrav1.ExistingHost{ProviderID: "server-17"}}}},
			want: []string{"spec.parameters.host.providerID"},
		},
		"HostAddressType": {
			reason: "an existing host's addresses have CAPI's address types",
			create: &infrav1.CrossplaneMachine{Spec: infrav1.CrossplaneMachineSpec{Parameters: infrav1.CrossplaneMachineParameters{
				Host: &infrav1.ExistingHost{ProviderID: "metal://server-17", Addresses: []infrav1.HostAddress{{Type: "Public", Address: "192.0.2.1"}}}}}},
			want: []string{"spec.parameters.host.addresses[0].type", `supported values: "Hostname"`},
		},
		"MachineTemplateNamesAHost": {
			reason: "one host is one machine; a template stamps out many",
			create: &infrav1.CrossplaneMachineTemplate{Spec: infrav1.CrossplaneMachineTemplateSpec{
				Template: infrav1.CrossplaneMachineTemplateResource{Spec: infrav1.CrossplaneMachineSpec{Parameters: infrav1.CrossplaneMachineParameters{
					Host: &infrav1.ExistingHost{ProviderID: "metal://server-17"}}}},
			}},
			want: []string{"spec.template.spec", "parameters.host names one existing host"},
		},
		"GrantWithoutNamespaces": {
			reason: "a grant says whom it grants",
			create: validGrant(func(g *infrav1.ClusterProviderConfigGrant) { g.Spec.AllowedNamespaces = infrav1.AllowedNamespaces{} }),
			want:   []string{"spec.allowedNamespaces", "needs names or a selector"},
		},
		"GrantNamespaceNameEmpty": {
			reason: "a granted namespace has a name",
			create: validGrant(func(g *infrav1.ClusterProviderConfigGrant) { g.Spec.AllowedNamespaces.Names = []string{"team-a", ""} }),
			want:   []string{"spec.allowedNamespaces.names[1]"},
		},
		"GrantSelectorOperatorUnknown": {
			reason: "the bridge could not read the selector",
			create: validGrant(func(g *infrav1.ClusterProviderConfigGrant) {
				g.Spec.AllowedNamespaces.Selector.MatchExpressions[0].Operator = "Near"
			}),
			want: []string{"spec.allowedNamespaces.selector", "operator In or NotIn with values"},
		},
		"GrantSelectorInWithoutValues": {
			reason: "In needs values",
			create: validGrant(func(g *infrav1.ClusterProviderConfigGrant) {
				g.Spec.AllowedNamespaces.Selector.MatchExpressions[0].Values = nil
			}),
			want: []string{"spec.allowedNamespaces.selector", "operator In or NotIn with values"},
		},
		"GrantSelectorExistsWithValues": {
			reason: "Exists takes no values",
			create: validGrant(func(g *infrav1.ClusterProviderConfigGrant) {
				g.Spec.AllowedNamespaces.Selector.MatchExpressions[0].Operator = metav1.LabelSelectorOpExists
			}),
			want: []string{"spec.allowedNamespaces.selector", "Exists or DoesNotExist without values"},
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

	// A cluster's and a grant's references to credentials follow one rule:
	// a name, and an API group that is a DNS subdomain.
	referrers := map[string]func(name, group string) client.Object{
		"Cluster": func(name, group string) client.Object {
			return validCluster(func(c *infrav1.CrossplaneCluster) {
				c.Spec.ProviderConfigRef.Name, c.Spec.ProviderConfigRef.APIGroup = name, group
			})
		},
		"Grant": func(name, group string) client.Object {
			return validGrant(func(g *infrav1.ClusterProviderConfigGrant) {
				g.Spec.ProviderConfigRef.Name, g.Spec.ProviderConfigRef.APIGroup = name, group
			})
		},
	}
	for kind, withRef := range referrers {
		cases[kind+"ProviderConfigNameMissing"] = invalid{
			reason: "a reference needs a name",
			create: withRef("", "aws.m.upbound.io"),
			want:   []string{"spec.providerConfigRef.name"},
		}
		cases[kind+"ProviderConfigGroupMalformed"] = invalid{
			reason: "the API group is a DNS subdomain",
			create: withRef("shared", "AWS Provider"),
			want:   []string{"spec.providerConfigRef.apiGroup"},
		}
	}

	ns := namespace(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			obj := tc.create.DeepCopyObject().(client.Object)
			obj.SetNamespace(ns)
			obj.SetName(nameOf(name))
			if _, ok := obj.(*infrav1.ClusterProviderConfigGrant); ok {
				obj.SetNamespace("")
				obj.SetName(nameOf(name) + "-" + ns)
			}

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

// Templates are immutable, as CAPI expects of them (a new one rolls the
// machines), but to CAPI's topology controller, which learns whether a
// ClusterClass's patches changed a template by a dry-run of the change marked
// with its annotation. Their metadata stays CAPI's to change.
func TestTemplatesAreImmutableButToTopologyDryRuns(t *testing.T) {
	bridge, err := env.StartBridge(ctx)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { NewWithT(t).Expect(bridge.Stop()).To(Succeed()) })
	ns := namespace(t)

	endpoint := validCluster().Spec
	endpoint.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "api.example.org", Port: 6443}
	templates := map[string]struct {
		create client.Object
		// change changes the spec in a way the stamped-out kind's own
		// rules refuse on update, too.
		change func(client.Object)
	}{
		"CrossplaneMachineTemplate": {
			create: &infrav1.CrossplaneMachineTemplate{Spec: infrav1.CrossplaneMachineTemplateSpec{
				Template: infrav1.CrossplaneMachineTemplateResource{Spec: validMachine().Spec},
			}},
			change: func(o client.Object) {
				o.(*infrav1.CrossplaneMachineTemplate).Spec.Template.Spec.Parameters.Size = "m6i.xlarge"
			},
		},
		"CrossplaneMachinePoolTemplate": {
			create: &infrav1.CrossplaneMachinePoolTemplate{Spec: infrav1.CrossplaneMachinePoolTemplateSpec{
				Template: infrav1.CrossplaneMachinePoolTemplateResource{Spec: infrav1.CrossplaneMachinePoolSpec{
					Parameters: infrav1.MachinePoolParameters{Size: "small"}}},
			}},
			change: func(o client.Object) {
				o.(*infrav1.CrossplaneMachinePoolTemplate).Spec.Template.Spec.Parameters.Size = "large"
			},
		},
		"CrossplaneControlPlaneTemplate": {
			create: &infrav1.CrossplaneControlPlaneTemplate{Spec: infrav1.CrossplaneControlPlaneTemplateSpec{
				Template: infrav1.CrossplaneControlPlaneTemplateResource{Spec: infrav1.CrossplaneControlPlaneSpec{
					ProviderConfigRef: &infrav1.ProviderConfigReference{APIGroup: "kubernetes.m.crossplane.io", Kind: "ProviderConfig", Name: "workload"}}},
			}},
			change: func(o client.Object) {
				o.(*infrav1.CrossplaneControlPlaneTemplate).Spec.Template.Spec.ProviderConfigRef.Name = "other"
			},
		},
		"CrossplaneClusterTemplate": {
			create: &infrav1.CrossplaneClusterTemplate{Spec: infrav1.CrossplaneClusterTemplateSpec{
				Template: infrav1.CrossplaneClusterTemplateResource{Spec: endpoint},
			}},
			change: func(o client.Object) {
				o.(*infrav1.CrossplaneClusterTemplate).Spec.Template.Spec.ControlPlaneEndpoint.Host = "other.example.org"
			},
		},
	}
	cases := map[string]struct {
		reason string
		// spec says whether the update changes the spec; dryRun and
		// annotated how it is sent.
		spec, dryRun, annotated bool
		wantErr                 bool
	}{
		"SpecChanged": {
			reason: "a changed spec is refused: a new template rolls what it stamped out",
			spec:   true, wantErr: true,
		},
		"SpecChangedInADryRun": {
			reason: "a dry-run is refused like the change it tries, unless CAPI's topology controller marks it",
			spec:   true, dryRun: true, wantErr: true,
		},
		"SpecChangedInATopologyDryRun": {
			reason: "CAPI's topology controller dry-runs a ClusterClass's patches, then creates a new template",
			spec:   true, dryRun: true, annotated: true,
		},
		"SpecChangedAnnotatedNotDryRun": {
			reason: "the annotation alone lets nothing change",
			spec:   true, annotated: true, wantErr: true,
		},
		"MetadataChanged": {
			reason:    "labels and annotations are not the template",
			annotated: true,
		},
	}
	for kind, tmpl := range templates {
		for name, tc := range cases {
			t.Run(kind+"/"+name, func(t *testing.T) {
				g := NewWithT(t)
				obj := tmpl.create.DeepCopyObject().(client.Object)
				obj.SetNamespace(ns)
				obj.SetName(nameOf(kind + name))
				g.Expect(env.Client.Create(ctx, obj)).To(Succeed())
				stored := obj.DeepCopyObject().(client.Object)
				update := func(spec, dryRun, annotated bool) error {
					o := stored.DeepCopyObject().(client.Object)
					if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
						return err
					}
					if spec {
						tmpl.change(o)
					}
					if annotated {
						o.SetAnnotations(map[string]string{clusterv1.TopologyDryRunAnnotation: ""})
					}
					if dryRun {
						return env.Client.Update(ctx, o, client.DryRunAll)
					}
					return env.Client.Update(ctx, o)
				}
				// The bridge maintains the policy once it adapts the
				// kinds, and the API server enforces it soon after: a
				// plain dry-run of the change says when.
				g.Eventually(func() error { return update(true, true, false) }, timeout, interval).Should(HaveOccurred())
				err := update(tc.spec, tc.dryRun, tc.annotated)
				if tc.wantErr {
					g.Expect(err).To(HaveOccurred(), tc.reason)
					g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
					g.Expect(err.Error()).To(ContainSubstring(kind+" spec is immutable: create a new template"), tc.reason)
					return
				}
				g.Expect(err).NotTo(HaveOccurred(), tc.reason)
				got := stored.DeepCopyObject().(client.Object)
				g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
				g.Expect(got.GetGeneration()).To(Equal(stored.GetGeneration()), "%s: the stored spec changed", tc.reason)
			})
		}
	}
}

// A machine's parameters are its template's: a change reaches it through
// CAPI, by a rollout or by an in-place update, which CAPI marks with its
// update-in-progress annotation and dry-runs first. Anyone else's change is
// refused with what to do instead. An XR no template made has none to keep
// to.
func TestMachineParametersChangeOnlyThroughCAPI(t *testing.T) {
	bridge, err := env.StartBridge(ctx)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { NewWithT(t).Expect(bridge.Stop()).To(Succeed()) })
	ns := namespace(t)

	cases := map[string]struct {
		reason                                     string
		resized, dryRun, inPlaceUpdate, noTemplate bool
		wantErr                                    bool
	}{
		"Resized": {
			reason:  "a machine resized outside CAPI would no longer be what its template says",
			resized: true, wantErr: true,
		},
		"ResizedInPlaceByCAPI": {
			reason:  "CAPI's in-place update writes the template's change, marked with its annotation",
			resized: true, inPlaceUpdate: true,
		},
		"ResizedInADryRun": {
			reason:  "KubeadmControlPlane dry-runs a change to learn whether a Machine can take it in place",
			resized: true, dryRun: true,
		},
		"Annotated": {
			reason:        "metadata is not the parameters",
			inPlaceUpdate: true,
		},
		"NoTemplate": {
			reason:  "an XR no template made (a standalone machine) may be resized",
			resized: true, noTemplate: true,
		},
	}
	// The bridge maintains the policy once it adapts the kind; a resize it
	// refuses says when the API server enforces it.
	probe := validMachine()
	probe.SetNamespace(ns)
	probe.SetName("probe")
	metav1.SetMetaDataAnnotation(&probe.ObjectMeta, clusterv1.TemplateClonedFromNameAnnotation, "workers")
	NewWithT(t).Expect(env.Client.Create(ctx, probe)).To(Succeed())
	NewWithT(t).Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Name: policies.ParametersPolicyName}, &admissionv1.ValidatingAdmissionPolicyBinding{})
	}, timeout, interval).Should(Succeed(), "the bridge applies the parameters policy")
	// Then each probe is a real change (a dry-run is let through), made
	// seldom enough that Crossplane's watch circuit stays closed.
	NewWithT(t).Eventually(func() bool {
		o := &infrav1.CrossplaneMachine{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(probe), o); err != nil {
			return false
		}
		o.Spec.Parameters.Size = map[string]string{"m6i.large": "m6i.2xlarge"}[o.Spec.Parameters.Size]
		if o.Spec.Parameters.Size == "" {
			o.Spec.Parameters.Size = "m6i.large"
		}
		return apierrors.IsInvalid(env.Client.Update(ctx, o))
	}, timeout, time.Second).Should(BeTrue(), "the parameters policy in force")
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			m := validMachine()
			m.SetNamespace(ns)
			m.SetName(nameOf(name))
			if !tc.noTemplate {
				metav1.SetMetaDataAnnotation(&m.ObjectMeta, clusterv1.TemplateClonedFromNameAnnotation, "workers")
			}
			var updateOnce func(resized, dryRun, inPlaceUpdate bool) error
			g.Expect(env.Client.Create(ctx, m)).To(Succeed())
			// The bridge writes the XR too (its hold): retried on conflict.
			update := func(resized, dryRun, inPlaceUpdate bool) error {
				return retry.RetryOnConflict(retry.DefaultRetry, func() error { return updateOnce(resized, dryRun, inPlaceUpdate) })
			}
			updateOnce = func(resized, dryRun, inPlaceUpdate bool) error {
				o := &infrav1.CrossplaneMachine{}
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), o); err != nil {
					return err
				}
				if resized {
					o.Spec.Parameters.Size = "m6i.xlarge"
				}
				if inPlaceUpdate {
					metav1.SetMetaDataAnnotation(&o.ObjectMeta, clusterv1.UpdateInProgressAnnotation, "")
				}
				if dryRun {
					return env.Client.Update(ctx, o, client.DryRunAll)
				}
				return env.Client.Update(ctx, o)
			}
			err := update(tc.resized, tc.dryRun, tc.inPlaceUpdate)
			if tc.wantErr {
				g.Expect(err).To(HaveOccurred(), tc.reason)
				g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
				g.Expect(err.Error()).To(ContainSubstring("spec.parameters: a machine takes its template's parameters: change the CrossplaneMachineTemplate"), tc.reason)
				return
			}
			g.Expect(err).NotTo(HaveOccurred(), tc.reason)
			got := &infrav1.CrossplaneMachine{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			want := "m6i.large"
			if tc.resized && !tc.dryRun {
				want = "m6i.xlarge"
			}
			g.Expect(got.Spec.Parameters.Size).To(Equal(want), tc.reason)
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

	// Grants and templates built from the same valid objects, every selector
	// operator among them.
	for i, op := range []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist} {
		grant := validGrant(func(g *infrav1.ClusterProviderConfigGrant) {
			e := &g.Spec.AllowedNamespaces.Selector.MatchExpressions[0]
			e.Operator = op
			if op == metav1.LabelSelectorOpExists || op == metav1.LabelSelectorOpDoesNotExist {
				e.Values = nil
			}
		})
		grant.Name = fmt.Sprintf("valid-%d-%s", i, ns)
		g.Expect(env.Client.Create(ctx, grant)).To(Succeed(), "operator %s", op)
		g.Expect(env.Client.Delete(ctx, grant)).To(Succeed())
	}
	mt := &infrav1.CrossplaneMachineTemplate{Spec: infrav1.CrossplaneMachineTemplateSpec{
		Template: infrav1.CrossplaneMachineTemplateResource{Spec: validMachine().Spec},
	}}
	mt.Namespace, mt.Name = ns, "valid"
	g.Expect(env.Client.Create(ctx, mt)).To(Succeed())
	ct := &infrav1.CrossplaneClusterTemplate{Spec: infrav1.CrossplaneClusterTemplateSpec{
		Template: infrav1.CrossplaneClusterTemplateResource{Spec: validCluster().Spec},
	}}
	ct.Namespace, ct.Name = ns, "valid"
	g.Expect(env.Client.Create(ctx, ct)).To(Succeed())

	// A host that already exists needs no size.
	host := &infrav1.CrossplaneMachine{Spec: infrav1.CrossplaneMachineSpec{Parameters: infrav1.CrossplaneMachineParameters{
		Host: &infrav1.ExistingHost{ProviderID: "metal://dc1/server-17", FailureDomain: "rack-a",
			Addresses: []infrav1.HostAddress{{Type: "InternalIP", Address: "10.0.0.17"}, {Type: "Hostname", Address: "server-17"}}}}}}
	host.Namespace, host.Name = ns, "valid-host"
	g.Expect(env.Client.Create(ctx, host)).To(Succeed())

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
