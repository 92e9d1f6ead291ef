package integration

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/controllers"
	"github.com/capxp/cluster-api-provider-crossplane/packages"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// installAWSCRDs installs provider-upjet-aws's credentials kinds and the ec2
// kinds named, read from its module at the version the package pins.
func installAWSCRDs(t *testing.T, resources ...string) {
	t.Helper()
	g := NewWithT(t)
	const ec2 = "xpkg.upbound.io/upbound/provider-aws-ec2"
	d, err := packages.Find(ec2)
	g.Expect(err).NotTo(HaveOccurred())
	dir, err := envtest.DownloadModule(packages.Modules[ec2], d.Version)
	g.Expect(err).NotTo(HaveOccurred())
	files := []string{
		filepath.Join(dir, "package", "crds", "aws.m.upbound.io_clusterproviderconfigs.yaml"),
		filepath.Join(dir, "package", "crds", "aws.m.upbound.io_providerconfigs.yaml"),
	}
	for _, r := range resources {
		files = append(files, filepath.Join(dir, "package", "crds", "ec2.aws.m.upbound.io_"+r+".yaml"))
	}
	g.Expect(env.InstallCRDFiles(files...)).To(Succeed())
}

// A tenant's XR sets spec.network; what its Composition makes of it puts a
// machine into a network only when a managed resource of its namespace
// reports that network: another tenant's subnet or security group is
// refused at admission of the instance, whoever creates it.
func TestMachinesJoinOnlyTheirNamespacesNetworks(t *testing.T) {
	installAWSCRDs(t, "vpcs", "subnets", "securitygroups", "instances")
	aws := credentials.DefaultProviders[0]
	stackWith(t, controllers.Options{CredentialsProviders: []credentials.Provider{aws}})
	removeCredentialsPolicies(t)
	g := NewWithT(t)
	mine, theirs := tenant(t, nil), tenant(t, nil)
	shared := "net" + uniqueGroup(mine, "")
	cpc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": aws.ConfigGroup + "/v1beta1", "kind": "ClusterProviderConfig", "metadata": map[string]any{"name": shared},
		"spec": map[string]any{"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"namespace": theirs, "name": "aws", "key": "credentials"}}},
	}}
	g.Expect(env.Client.Create(ctx, cpc)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, cpc) })
	grant := &infrav1.ClusterProviderConfigGrant{
		ObjectMeta: metav1.ObjectMeta{Name: shared},
		Spec: infrav1.ClusterProviderConfigGrantSpec{
			ProviderConfigRef: &infrav1.ClusterProviderConfigReference{APIGroup: aws.ConfigGroup, Name: shared},
			AllowedNamespaces: infrav1.AllowedNamespaces{Names: []string{mine, theirs}},
		},
	}
	g.Expect(env.Client.Create(ctx, grant)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, grant) })

	// What a provider would create and report: the managed resources of
	// each namespace's own cluster network.
	mr := func(ns, kind, name string, forProvider map[string]any) *unstructured.Unstructured {
		forProvider["region"] = "eu-west-1"
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "ec2.aws.m.upbound.io/v1beta1", "kind": kind,
			"metadata": map[string]any{"namespace": ns, "name": name},
			"spec": map[string]any{
				"providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": shared},
				"forProvider":       forProvider,
			},
		}}
	}
	reported := func(ns, kind, name string, atProvider map[string]any) {
		o := mr(ns, kind, name, map[string]any{})
		g.Eventually(func() error { return env.Client.Create(ctx, o) }, timeout, interval).Should(Succeed())
		g.Expect(unstructured.SetNestedMap(o.Object, atProvider, "status", "atProvider")).To(Succeed())
		g.Expect(env.Client.Status().Update(ctx, o)).To(Succeed())
	}
	reported(mine, "VPC", "vpc", map[string]any{"id": "vpc-mine", "defaultSecurityGroupId": "sg-mine-default"})
	reported(mine, "Subnet", "subnet", map[string]any{"id": "subnet-mine"})
	reported(mine, "SecurityGroup", "nodes", map[string]any{"id": "sg-mine"})
	reported(theirs, "Subnet", "subnet", map[string]any{"id": "subnet-theirs"})
	reported(theirs, "SecurityGroup", "nodes", map[string]any{"id": "sg-theirs"})

	g.Eventually(func(g Gomega) {
		rec := &infrav1.NamespaceCredentials{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: mine, Name: infrav1.NamespaceCredentialsName}, rec)).To(Succeed())
		g.Expect(rec.Spec.Networks).To(Equal(map[string]string{
			"vpc-mine": "VPC vpc", "sg-mine-default": "VPC vpc", "subnet-mine": "Subnet subnet", "sg-mine": "SecurityGroup nodes",
		}))
	}, timeout, interval).Should(Succeed())

	instance := func(name, subnet string, groups ...any) *unstructured.Unstructured {
		return mr(mine, "Instance", name, map[string]any{"subnetId": subnet, "vpcSecurityGroupIds": groups})
	}
	// The API server loads the policy asynchronously.
	g.Eventually(func() error {
		return env.Client.Create(ctx, instance("probe", "subnet-theirs", "sg-mine"), client.DryRunAll)
	}, timeout, interval).
		Should(MatchError(ContainSubstring("spec.forProvider.subnetId: subnet-theirs is not a network of namespace " + mine)))
	g.Expect(env.Client.Create(ctx, instance("probe", "subnet-mine", "sg-mine", "sg-theirs"), client.DryRunAll)).
		To(MatchError(ContainSubstring("spec.forProvider.vpcSecurityGroupIds: sg-theirs is not a network of namespace " + mine)))
	g.Expect(env.Client.Create(ctx, instance("probe", "subnet-unknown"), client.DryRunAll)).
		To(MatchError(ContainSubstring("subnet-unknown is not a network")), "an ID no managed resource reports is nobody's")

	// A resource created with its external name exists already (moved by
	// clusterctl, whose target has not observed its network yet).
	moved := instance("moved", "subnet-elsewhere", "sg-elsewhere")
	moved.SetAnnotations(map[string]string{"crossplane.io/external-name": "i-0123456789abcdef0"})
	g.Expect(env.Client.Create(ctx, moved, client.DryRunAll)).To(Succeed())

	// Its own network is admitted; a security group added later must be its
	// own too; the VPC's default group (where AWS puts an instance named
	// without groups, written back by the provider) is.
	own := instance("machine", "subnet-mine", "sg-mine")
	g.Expect(env.Client.Create(ctx, own)).To(Succeed())
	g.Expect(unstructured.SetNestedSlice(own.Object, []any{"sg-mine", "sg-theirs"}, "spec", "forProvider", "vpcSecurityGroupIds")).To(Succeed())
	g.Expect(env.Client.Update(ctx, own)).To(MatchError(ContainSubstring("sg-theirs is not a network of namespace " + mine)))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(own), own)).To(Succeed())
	g.Expect(unstructured.SetNestedSlice(own.Object, []any{"sg-mine", "sg-mine-default"}, "spec", "forProvider", "vpcSecurityGroupIds")).To(Succeed())
	g.Expect(env.Client.Update(ctx, own)).To(Succeed())

	// Once its subnet's managed resource is gone the ID is no longer its
	// namespace's: what already names it is kept (deleting what runs in a
	// network comes first), nothing new may name it.
	g.Expect(env.Client.Delete(ctx, mr(mine, "Subnet", "subnet", map[string]any{}))).To(Succeed())
	g.Eventually(func() error { return env.Client.Create(ctx, instance("probe", "subnet-mine"), client.DryRunAll) }, timeout, interval).
		Should(MatchError(ContainSubstring("subnet-mine is not a network")))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(own), own)).To(Succeed())
	own.SetLabels(map[string]string{"touched": "yes"})
	g.Expect(env.Client.Update(ctx, own)).To(Succeed(), "an update that adds no network ID passes")
}
