package compositions_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	pkgmetav1 "github.com/crossplane/crossplane/apis/v2/pkg/meta/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/internal/compcheck"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/internal/render"
	"github.com/capxp/cluster-api-provider-crossplane/packages"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

var update = flag.Bool("update", false, "rewrite the golden files of every Composition's first render")

// The render engine and a real API server holding our XRDs' CRDs and every
// provider CRD the Compositions compose, shared by the tests of this package.
var (
	engine *render.Engine
	env    *envtest.Environment
	pkg    *pkgmetav1.Configuration
)

// providers maps the API group of a composed kind to the package providing
// it; packages.Modules names the Go module its CRDs are read from.
var providers = map[string]string{
	"ec2.aws.m.upbound.io":            "xpkg.upbound.io/upbound/provider-aws-ec2",
	"elbv2.aws.m.upbound.io":          "xpkg.upbound.io/upbound/provider-aws-elbv2",
	"secretsmanager.aws.m.upbound.io": "xpkg.upbound.io/upbound/provider-aws-secretsmanager",
	"eks.aws.m.upbound.io":            "xpkg.upbound.io/upbound/provider-aws-eks",
	"autoscaling.aws.m.upbound.io":    "xpkg.upbound.io/upbound/provider-aws-autoscaling",
	"iam.aws.m.upbound.io":            "xpkg.upbound.io/upbound/provider-aws-iam",
	"kubernetes.m.crossplane.io":      "xpkg.crossplane.io/crossplane-contrib/provider-kubernetes",
}

func TestMain(m *testing.M) {
	flag.Parse()
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctx := context.Background()
	var err error
	if pkg, err = packages.Configuration(); err != nil {
		return 0, err
	}
	deps, err := packages.Dependencies("Function")
	if err != nil {
		return 0, err
	}
	fns := make([]render.Function, 0, len(deps))
	for _, d := range deps {
		fns = append(fns, render.Function{Name: d.FunctionName(), Binary: envtest.Tool(d.Name(), d.Version)})
	}
	own, err := envtest.OwnFunction(ctx)
	if err != nil {
		return 0, err
	}
	fns = append(fns, own)
	xp, err := envtest.Required(envtest.CrossplaneModule)
	if err != nil {
		return 0, err
	}
	if engine, err = render.Start(ctx, envtest.Tool("crossplane", xp.Version), fns...); err != nil {
		return 0, err
	}
	defer engine.Stop() //nolint:errcheck // best effort at exit.

	if env, err = envtest.Start(ctx); err != nil {
		return 0, err
	}
	defer env.Stop() //nolint:errcheck // best effort at exit.
	crds, err := providerCRDs()
	if err != nil {
		return 0, err
	}
	if err := env.InstallCRDFiles(crds...); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// composedKinds lists the apiVersion and kind of every resource template of
// every shipped Composition, by resource name.
func composedKinds() (map[string]metav1.TypeMeta, error) {
	out := map[string]metav1.TypeMeta{}
	for _, b := range compositions.Backends {
		kinds, err := compositions.ComposedKinds(b)
		if err != nil {
			return nil, err
		}
		for _, gvk := range kinds {
			apiVersion, kind := gvk.ToAPIVersionAndKind()
			out[plural(kind)+"."+gvk.Group] = metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
		}
	}
	return out, nil
}

func plural(kind string) string { return compositions.Plural(kind) }

// providerCRDs finds the CRD file of every composed kind in its provider's
// module, at the version the package pins.
func providerCRDs() ([]string, error) {
	kinds, err := composedKinds()
	if err != nil {
		return nil, err
	}
	var files []string
	for name, tm := range kinds {
		group := name[strings.Index(name, ".")+1:]
		ref, ok := providers[group]
		if !ok {
			return nil, errors.Errorf("no provider known for composed kind %s (%s)", tm.Kind, group)
		}
		d, err := packages.Find(ref)
		if err != nil {
			return nil, errors.Wrapf(err, "composed kind %s", name)
		}
		dir, err := envtest.DownloadModule(packages.Modules[ref], d.Version)
		if err != nil {
			return nil, err
		}
		files = append(files, filepath.Join(dir, "package", "crds", group+"_"+plural(tm.Kind)+".yaml"))
	}
	sort.Strings(files)
	return files, nil
}

// TestPackage checks the Configuration package against the Compositions it
// ships: every function and provider they use is a pinned dependency, and
// the activation policy activates exactly the kinds they compose.
func TestPackage(t *testing.T) {
	for _, d := range pkg.Spec.DependsOn {
		if d.Package == nil || d.APIVersion == nil || d.Kind == nil {
			t.Errorf("dependency %+v: want apiVersion, kind and package", d)
			continue
		}
		if !strings.HasPrefix(d.Version, "v") || strings.ContainsAny(d.Version, "<>=~^* ") {
			t.Errorf("dependency %s: version %q is not pinned to one release", *d.Package, d.Version)
		}
	}

	fns, err := packages.Dependencies("Function")
	if err != nil {
		t.Fatal(err)
	}
	// The release adds CAPXP's own.
	functions := map[string]bool{release.DefaultFunctionName: true}
	for _, d := range fns {
		functions[d.FunctionName()] = true
	}
	for _, b := range compositions.Backends {
		comps, err := compositions.ReadDir(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range comps {
			steps, _, _ := unstructured.NestedSlice(c.Object, "spec", "pipeline")
			for _, s := range steps {
				fn, _, _ := unstructured.NestedString(s.(map[string]any), "functionRef", "name")
				if !functions[fn] {
					t.Errorf("Composition %s calls function %q, which the package does not depend on", c.GetName(), fn)
				}
			}
		}
	}

	kinds, err := composedKinds()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(envtest.RepoRoot(), "packages", "configuration", "activation-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	policy := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &policy.Object); err != nil {
		t.Fatal(err)
	}
	activated, _, _ := unstructured.NestedStringSlice(policy.Object, "spec", "activate")
	want := make([]string, 0, len(kinds))
	for name := range kinds {
		want = append(want, name)
	}
	sort.Strings(want)
	sort.Strings(activated)
	if strings.Join(activated, ",") != strings.Join(want, ",") {
		t.Errorf("activation policy activates\n  %v\nthe Compositions compose\n  %v", activated, want)
	}
}

// contractCase is one Composition driven from its first render to the
// contract outputs.
type contractCase struct {
	reason      string
	composition string
	xr          string
	// resources is how many resources the Composition composes once done.
	resources int
	// check asserts the contract outputs field by field against what the
	// simulated providers reported.
	check func(t *testing.T, xr *unstructured.Unstructured, observed map[string]*unstructured.Unstructured)
}

// contractCases is a function so that a case may converge another.
func contractCases() map[string]contractCase {
	return map[string]contractCase{
		"AWSCluster": {
			reason:      "the AWS cluster composes the network and load balancer in three failure domains and reports endpoint, failure domains and network",
			composition: "aws/cluster.yaml",
			xr:          "aws-cluster.yaml",
			resources:   32,
			check: func(t *testing.T, xr *unstructured.Unstructured, o map[string]*unstructured.Unstructured) {
				t.Helper()
				want := map[string]any{
					"status.outputs.controlPlaneEndpoint.host": str(t, o["control-plane-load-balancer"], "status.atProvider.dnsName"),
					"status.outputs.controlPlaneEndpoint.port": int64(443),
					"status.outputs.network.id":                str(t, o["vpc"], "status.atProvider.id"),
				}
				for i, zone := range []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"} {
					want[fmt.Sprintf("status.failureDomains[%d].name", i)] = zone
					want[fmt.Sprintf("status.failureDomains[%d].controlPlane", i)] = i < 2
					for j, role := range []string{"Private", "Public"} {
						subnet := o[fmt.Sprintf("subnet-%s-%d", strings.ToLower(role), i)]
						at := fmt.Sprintf("status.outputs.network.subnets[%d]", 2*i+j)
						want[at+".id"] = str(t, subnet, "status.atProvider.id")
						want[at+".failureDomain"] = zone
						want[at+".role"] = role
						want[at+".cidrBlock"] = str(t, subnet, "spec.forProvider.cidrBlock")
					}
				}
				want["status.outputs.network.subnets[0].cidrBlock"] = "10.20.64.0/18"
				want["status.outputs.network.subnets[1].cidrBlock"] = "10.20.0.0/20"
				want["status.outputs.network.subnets[5].cidrBlock"] = "10.20.32.0/20"
				want["status.outputs.network.securityGroups[0].id"] = str(t, o["control-plane-security-group"], "status.atProvider.id")
				want["status.outputs.network.securityGroups[0].role"] = "ControlPlane"
				want["status.outputs.network.securityGroups[1].id"] = str(t, o["node-security-group"], "status.atProvider.id")
				want["status.outputs.network.securityGroups[1].role"] = "Node"
				assertFields(t, xr, want)
				assertLen(t, xr, "status.failureDomains", 3)
				assertLen(t, xr, "status.outputs.network.subnets", 6)
			},
		},
		"AWSWorkerMachine": {
			reason:      "an AWS worker is an instance in its subnet fed by a Secrets Manager secret, reporting providerID, addresses and failure domain",
			composition: "aws/machine.yaml",
			xr:          "aws-machine-worker.yaml",
			resources:   4,
			check:       checkAWSMachine,
		},
		"AWSControlPlaneMachine": {
			reason:      "an AWS control-plane machine also registers its instance in the cluster's API target group",
			composition: "aws/machine-control-plane.yaml",
			xr:          "aws-machine-control-plane.yaml",
			resources:   5,
			check: func(t *testing.T, xr *unstructured.Unstructured, o map[string]*unstructured.Unstructured) {
				t.Helper()
				checkAWSMachine(t, xr, o)
				assertFields(t, o["control-plane-target"], map[string]any{
					"spec.forProvider.targetId": str(t, o["instance"], "status.atProvider.id"),
					"spec.forProvider.port":     int64(6443),
				})
				// The attachment finds the target group the cluster composed.
				cluster := converge(t, contractCases()["AWSCluster"])
				tg := cluster.composed["control-plane-target-group"]
				sel, _, _ := unstructured.NestedStringMap(o["control-plane-target"].Object, "spec", "forProvider", "targetGroupArnSelector", "matchLabels")
				if !matches(tg.GetLabels(), sel) {
					t.Errorf("target group selector %v does not match the cluster's target group labels %v", sel, tg.GetLabels())
				}
			},
		},
		"AWSControlPlane": {
			reason:      "an EKS control plane composes its IAM role, the cluster in the injected subnets at the asked minor, its network add-ons and a ClusterAuth, and reports endpoint, version and the kubeconfig's secret",
			composition: "aws/controlplane.yaml",
			xr:          "aws-controlplane.yaml",
			resources:   6,
			check: func(t *testing.T, xr *unstructured.Unstructured, o map[string]*unstructured.Unstructured) {
				t.Helper()
				cluster := o["cluster"]
				assertFields(t, cluster, map[string]any{
					"spec.forProvider.region":                        "eu-west-1",
					"spec.forProvider.version":                       "1.36",
					"spec.forProvider.vpcConfig.subnetIds[0]":        "subnet-0a1b2c3d",
					"spec.forProvider.vpcConfig.subnetIds[2]":        "subnet-0c1d2e3f",
					"spec.forProvider.vpcConfig.securityGroupIds[0]": "sg-control-plane",
					"spec.forProvider.tags[capxp.dev/cluster]":       "alpha",
					"spec.providerConfigRef.name":                    "team-a-aws",
				})
				host := strings.ToLower(strings.TrimPrefix(str(t, cluster, "status.atProvider.endpoint"), "https://"))
				assertFields(t, xr, map[string]any{
					"status.outputs.controlPlaneEndpoint.host": host,
					"status.outputs.controlPlaneEndpoint.port": int64(443),
					"status.outputs.version":                   "v1.36",
					"status.outputs.kubeconfig.name":           "alpha-eks-kubeconfig",
					"status.outputs.kubeconfig.key":            "kubeconfig",
				})
				assertFields(t, o["cluster-auth"], map[string]any{
					"spec.writeConnectionSecretToRef.name": "alpha-eks-kubeconfig",
					"spec.forProvider.region":              "eu-west-1",
				})
				assertFields(t, o["cluster-role-policy"], map[string]any{
					"spec.forProvider.policyArn": "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",
				})
				for _, addon := range []string{"vpc-cni", "kube-proxy"} {
					assertFields(t, o[addon], map[string]any{"spec.forProvider.addonName": addon})
				}
				// The role, the cluster and its add-ons find each other
				// within the XR.
				role := o["cluster-role"]
				sel, _, _ := unstructured.NestedStringMap(cluster.Object, "spec", "forProvider", "roleArnSelector", "matchLabels")
				if !matches(role.GetLabels(), sel) {
					t.Errorf("role selector %v does not match the role's labels %v", sel, role.GetLabels())
				}
			},
		},
		"BYOCluster": {
			reason:      "a bring-your-own cluster composes nothing and reports the infrastructure it was given",
			composition: "byo/cluster.yaml",
			xr:          "byo-cluster.yaml",
			resources:   0,
			check: func(t *testing.T, xr *unstructured.Unstructured, _ map[string]*unstructured.Unstructured) {
				t.Helper()
				assertFields(t, xr, map[string]any{
					"status.outputs.controlPlaneEndpoint.host":        "api.gamma.example.internal",
					"status.outputs.controlPlaneEndpoint.port":        int64(6443),
					"status.failureDomains[0].name":                   "dc1-rack-a",
					"status.failureDomains[0].controlPlane":           true,
					"status.failureDomains[1].name":                   "dc1-rack-b",
					"status.failureDomains[1].controlPlane":           false,
					"status.outputs.network.id":                       "vpc-existing",
					"status.outputs.network.subnets[0].id":            "subnet-existing-a",
					"status.outputs.network.subnets[0].failureDomain": "dc1-rack-a",
					"status.outputs.network.subnets[0].role":          "Private",
					"status.outputs.network.subnets[1].id":            "subnet-existing-b",
					"status.outputs.network.subnets[1].cidrBlock":     "10.1.1.0/24",
				})
			},
		},
		"BYOMachine": {
			reason:      "a bring-your-own machine composes nothing and reports the host it was given",
			composition: "byo/machine.yaml",
			xr:          "byo-machine.yaml",
			resources:   0,
			check: func(t *testing.T, xr *unstructured.Unstructured, _ map[string]*unstructured.Unstructured) {
				t.Helper()
				assertFields(t, xr, map[string]any{
					"status.outputs.providerID":   "metal://dc1/rack-b/server-17",
					"status.failureDomain":        "dc1-rack-b",
					"status.addresses[0].type":    "InternalIP",
					"status.addresses[0].address": "10.1.1.17",
					"status.addresses[1].type":    "Hostname",
				})
			},
		},
		"LocalCluster": {
			reason:      "the local cluster observes the workload API server's endpoint through provider-kubernetes",
			composition: "local/cluster.yaml",
			xr:          "local-cluster.yaml",
			resources:   1,
			check: func(t *testing.T, xr *unstructured.Unstructured, o map[string]*unstructured.Unstructured) {
				t.Helper()
				assertFields(t, o["api-server-endpoint"], map[string]any{
					"spec.managementPolicies[0]":              "Observe",
					"spec.forProvider.manifest.kind":          "EndpointSlice",
					"spec.forProvider.manifest.metadata.name": "kubernetes",
				})
				assertFields(t, xr, map[string]any{
					"status.outputs.controlPlaneEndpoint.host": "127.0.0.1",
					"status.outputs.controlPlaneEndpoint.port": int64(36443),
					"status.failureDomains[0].name":            "zone-a",
					"status.failureDomains[1].name":            "zone-b",
					"status.failureDomains[1].controlPlane":    true,
				})
			},
		},
		"LocalControlPlane": {
			reason:      "the local control plane observes the workload API server's endpoint and version, and names the Secret of its kubeconfig",
			composition: "local/controlplane.yaml",
			xr:          "local-controlplane.yaml",
			resources:   2,
			check: func(t *testing.T, xr *unstructured.Unstructured, o map[string]*unstructured.Unstructured) {
				t.Helper()
				assertFields(t, o["service"], map[string]any{
					"spec.managementPolicies[0]":                   "Observe",
					"spec.forProvider.manifest.kind":               "ConfigMap",
					"spec.forProvider.manifest.metadata.namespace": "kube-public",
					"spec.providerConfigRef.name":                  "delta-workload",
				})
				assertFields(t, xr, map[string]any{
					"status.outputs.controlPlaneEndpoint.host": "127.0.0.1",
					"status.outputs.controlPlaneEndpoint.port": int64(36443),
					"status.outputs.version":                   "v1.36.5",
					"status.outputs.kubeconfig.name":           "workload-kubeconfig",
					"status.outputs.kubeconfig.key":            "kubeconfig",
				})
			},
		},
		"LocalMachine": {
			reason:      "a local machine registers a Node carrying its providerID in the workload cluster",
			composition: "local/machine.yaml",
			xr:          "local-machine.yaml",
			resources:   1,
			check: func(t *testing.T, xr *unstructured.Unstructured, o map[string]*unstructured.Unstructured) {
				t.Helper()
				assertFields(t, o["node"], map[string]any{
					"spec.forProvider.manifest.kind":                                         "Node",
					"spec.forProvider.manifest.metadata.name":                                "delta-md-0-p8d7w.dev",
					"spec.forProvider.manifest.spec.providerID":                              "capxp-local:///dev/delta-md-0-p8d7w",
					"spec.forProvider.manifest.metadata.labels[topology.kubernetes.io/zone]": "zone-b",
				})
				assertFields(t, xr, map[string]any{
					"status.outputs.providerID":   "capxp-local:///dev/delta-md-0-p8d7w",
					"status.failureDomain":        "zone-b",
					"status.addresses[0].type":    "Hostname",
					"status.addresses[0].address": "delta-md-0-p8d7w.dev",
				})
			},
		},
		"AWSMachinePool": {
			reason:      "an AWS machine pool is an auto scaling group launched from a launch template in the pool's subnets, its instances listed by function-asg-instances with the pool's credentials",
			composition: "aws/machinepool.yaml",
			xr:          "aws-machinepool.yaml",
			resources:   5,
			check: func(t *testing.T, xr *unstructured.Unstructured, o map[string]*unstructured.Unstructured) {
				t.Helper()
				assertFields(t, o["launch-template"], map[string]any{
					"spec.forProvider.imageId":                 "ami-0123456789abcdef0",
					"spec.forProvider.instanceType":            "m6i.large",
					"spec.forProvider.vpcSecurityGroupIds[0]":  "sg-node",
					"spec.forProvider.iamInstanceProfile.name": "capxp-nodes",
					"spec.forProvider.region":                  "eu-west-1",
					"spec.providerConfigRef.name":              "team-a-aws",
				})
				// Only instances in the cluster's network may read the pool's data.
				checkBootstrapPolicy(t, o, "aws:Ec2InstanceSourceVpc", str(t, xr, "spec.network.networkID"))
				ud, err := base64.StdEncoding.DecodeString(str(t, o["launch-template"], "spec.forProvider.userData"))
				if err != nil || !strings.Contains(string(ud), "--secret-id capxp/team-a/alpha-pool-0 ") {
					t.Errorf("launch template user data: want a script fetching capxp/team-a/alpha-pool-0, got %q (%v)", ud, err)
				}
				assertFields(t, o["auto-scaling-group"], map[string]any{
					"spec.forProvider.minSize":                int64(3),
					"spec.forProvider.maxSize":                int64(3),
					"spec.forProvider.desiredCapacity":        int64(3),
					"spec.forProvider.vpcZoneIdentifier[0]":   "subnet-0a1b2c3d",
					"spec.forProvider.vpcZoneIdentifier[1]":   "subnet-0b1c2d3e",
					"spec.forProvider.launchTemplate.version": "$Latest",
					"spec.forProvider.tag[0].value":           "alpha",
					"spec.forProvider.tag[1].value":           "team-a/alpha-pool-0",
					"spec.providerConfigRef.kind":             "ProviderConfig",
					"spec.providerConfigRef.name":             "team-a-aws",
				})
				ids, _, _ := unstructured.NestedStringSlice(xr.Object, "status", "outputs", "providerIDList")
				zones := map[string]int{}
				for _, id := range ids {
					zone, instance, ok := strings.Cut(strings.TrimPrefix(id, "aws:///"), "/")
					if !ok || !strings.HasPrefix(instance, "i-") {
						t.Errorf("status.outputs.providerIDList: %q is no aws:///ZONE/i-… provider ID", id)
					}
					zones[zone]++
				}
				if len(ids) != 3 || zones["eu-west-1a"] != 2 || zones["eu-west-1b"] != 1 {
					t.Errorf("status.outputs.providerIDList: want the group's three instances over eu-west-1a and eu-west-1b, got %q", ids)
				}
			},
		},
		"AWSEKSMachinePool": {
			reason:      "an EKS machine pool is a managed node group of the control plane's EKS cluster in the pool's subnets, with its node role, its instances listed by function-asg-instances with the pool's credentials",
			composition: "aws/machinepool-eks.yaml",
			xr:          "aws-eks-machinepool.yaml",
			resources:   5,
			check: func(t *testing.T, xr *unstructured.Unstructured, o map[string]*unstructured.Unstructured) {
				t.Helper()
				ng := o["node-group"]
				assertFields(t, ng, map[string]any{
					"spec.forProvider.region":                    "eu-west-1",
					"spec.forProvider.version":                   "1.36",
					"spec.forProvider.amiType":                   "AL2023_x86_64_STANDARD",
					"spec.forProvider.instanceTypes[0]":          "m6i.large",
					"spec.forProvider.diskSize":                  int64(40),
					"spec.forProvider.subnetIds[0]":              "subnet-0a1b2c3d",
					"spec.forProvider.subnetIds[1]":              "subnet-0b1c2d3e",
					"spec.forProvider.scalingConfig.minSize":     int64(3),
					"spec.forProvider.scalingConfig.desiredSize": int64(3),
					"spec.forProvider.scalingConfig.maxSize":     int64(3),
					"spec.forProvider.tags[capxp.dev/cluster]":   "alpha",
					"spec.providerConfigRef.kind":                "ProviderConfig",
					"spec.providerConfigRef.name":                "team-a-aws",
				})
				for name, policy := range map[string]string{
					"node-role-worker-policy":   "AmazonEKSWorkerNodePolicy",
					"node-role-cni-policy":      "AmazonEKS_CNI_Policy",
					"node-role-registry-policy": "AmazonEC2ContainerRegistryReadOnly",
				} {
					assertFields(t, o[name], map[string]any{
						"spec.forProvider.policyArn":  "arn:aws:iam::aws:policy/" + policy,
						"spec.providerConfigRef.name": "team-a-aws",
					})
				}
				// The node group finds the EKS cluster the control plane
				// composed for the same Cluster API cluster.
				cp := converge(t, contractCases()["AWSControlPlane"])
				sel, _, _ := unstructured.NestedStringMap(ng.Object, "spec", "forProvider", "clusterNameSelector", "matchLabels")
				if eks := cp.composed["cluster"]; !matches(eks.GetLabels(), sel) || sel["cluster.x-k8s.io/cluster-name"] != "alpha" {
					t.Errorf("node group's cluster selector %v does not match the control plane's EKS cluster labels %v", sel, eks.GetLabels())
				}
				ids, _, _ := unstructured.NestedStringSlice(xr.Object, "status", "outputs", "providerIDList")
				if len(ids) != 3 || !strings.HasPrefix(ids[0], "aws:///eu-west-1") {
					t.Errorf("status.outputs.providerIDList: want the node group's three instances, got %q", ids)
				}
			},
		},
		"LocalMachinePool": {
			reason:      "a local machine pool asks the plane's auto scaling group for its replicas and reports the instances the plane registered",
			composition: "local/machinepool.yaml",
			xr:          "local-machinepool.yaml",
			resources:   2,
			check: func(t *testing.T, xr *unstructured.Unstructured, o map[string]*unstructured.Unstructured) {
				t.Helper()
				assertFields(t, o["auto-scaling-group"], map[string]any{
					"spec.forProvider.manifest.kind":                "ConfigMap",
					"spec.forProvider.manifest.metadata.namespace":  "capxp-local-machine-pools",
					"spec.forProvider.manifest.metadata.name":       "dev.delta-pool-0",
					"spec.forProvider.manifest.data.replicas":       "3",
					"spec.forProvider.manifest.data.failureDomains": `["zone-a","zone-b"]`,
					"spec.forProvider.manifest.data.version":        "v1.36.5",
					"spec.forProvider.manifest.data.name":           "delta-pool-0",
					"spec.forProvider.manifest.data.namespace":      "dev",
					"spec.providerConfigRef.name":                   "delta-workload",
				})
				assertFields(t, o["instances"], map[string]any{
					"spec.managementPolicies[0]":              "Observe",
					"spec.forProvider.manifest.metadata.name": "dev.delta-pool-0.instances",
					"spec.providerConfigRef.name":             "delta-workload",
				})
				ids, _, _ := unstructured.NestedStringSlice(xr.Object, "status", "outputs", "providerIDList")
				if len(ids) != 3 || !strings.HasPrefix(ids[0], "capxp-local:///dev/delta-pool-0-") {
					t.Errorf("status.outputs.providerIDList: want the plane's three instances, got %q", ids)
				}
			},
		},
	}
}

func checkAWSMachine(t *testing.T, xr *unstructured.Unstructured, o map[string]*unstructured.Unstructured) {
	t.Helper()
	inst := o["instance"]
	id := str(t, inst, "status.atProvider.id")
	assertFields(t, xr, map[string]any{
		"status.outputs.providerID":   "aws:///eu-west-1b/" + id,
		"status.failureDomain":        "eu-west-1b",
		"status.addresses[0].type":    "InternalIP",
		"status.addresses[0].address": str(t, inst, "status.atProvider.privateIp"),
		"status.addresses[1].type":    "InternalDNS",
		"status.addresses[1].address": str(t, inst, "status.atProvider.privateDns"),
	})
	assertFields(t, inst, map[string]any{
		"spec.forProvider.region":                     "eu-west-1",
		"spec.forProvider.instanceType":               "m6i.large",
		"spec.forProvider.ami":                        "ami-0123456789abcdef0",
		"spec.forProvider.subnetId":                   "subnet-0b1c2d3e",
		"spec.forProvider.availabilityZone":           "eu-west-1b",
		"spec.forProvider.rootBlockDevice.volumeSize": int64(80),
	})
	groups, _, _ := unstructured.NestedStringSlice(xr.Object, "spec", "network", "securityGroupIDs")
	got, _, _ := unstructured.NestedStringSlice(inst.Object, "spec", "forProvider", "vpcSecurityGroupIds")
	if strings.Join(got, ",") != strings.Join(groups, ",") {
		t.Errorf("instance security groups: got %v, want the XR's %v", got, groups)
	}
	// The user data fetches the secret the secret version fills, by name.
	name := str(t, o["bootstrap-secret"], "spec.forProvider.name")
	if name != "capxp/team-a/"+xr.GetName() {
		t.Errorf("bootstrap secret name: got %q", name)
	}
	if ud := str(t, inst, "spec.forProvider.userData"); !strings.Contains(ud, "--secret-id "+name+" ") || !strings.Contains(ud, "--region eu-west-1 ") {
		t.Errorf("user data does not fetch secret %s in eu-west-1:\n%s", name, ud)
	}
	assertFields(t, o["bootstrap-secret-version"], map[string]any{
		"spec.forProvider.secretStringSecretRef.name": xr.GetName() + "-bootstrap",
		"spec.forProvider.secretStringSecretRef.key":  "value",
	})
	// Only the machine's own instance may read its bootstrap data.
	checkBootstrapPolicy(t, o, "ec2:SourceInstanceARN", str(t, inst, "status.atProvider.arn"))
}

// checkBootstrapPolicy asserts that the bootstrap secret's resource policy
// denies every request made with an instance's credentials whose key is not
// want, and that the data was stored only once the policy was in place.
func checkBootstrapPolicy(t *testing.T, o map[string]*unstructured.Unstructured, key, want string) {
	t.Helper()
	var doc struct {
		Statement []struct {
			Effect, Action, Resource string
			Principal                any
			Condition                map[string]map[string]string
		}
	}
	if err := json.Unmarshal([]byte(str(t, o["bootstrap-secret-policy"], "spec.forProvider.policy")), &doc); err != nil {
		t.Fatalf("bootstrap secret policy: %v", err)
	}
	if len(doc.Statement) != 1 {
		t.Fatalf("bootstrap secret policy: want one statement, got %+v", doc.Statement)
	}
	st := doc.Statement[0]
	if st.Effect != "Deny" || st.Action != "secretsmanager:*" || st.Principal != "*" ||
		st.Condition["Null"]["ec2:SourceInstanceARN"] != "false" || st.Condition["StringNotEquals"][key] != want || want == "" {
		t.Errorf("bootstrap secret policy: want a Deny of secretsmanager:* to every instance whose %s is not %q, got %+v", key, want, st)
	}
	if got := o["bootstrap-secret-version"].GetAnnotations()["capxp.dev/bootstrap-secret-policy"]; got != str(t, o["bootstrap-secret-policy"], "status.atProvider.id") {
		t.Errorf("bootstrap secret version: stored before its policy (annotation %q)", got)
	}
}

// TestCompositions renders every Composition with Crossplane's engine and
// the real functions, compares the first render with its golden file, feeds
// the composed resources back as the providers would report them, round
// after round, until the XR is ready with its contract outputs, and checks
// every composed resource against its provider's CRD on the API server.
func TestCompositions(t *testing.T) {
	for name, tc := range contractCases() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := converge(t, tc)
			golden(t, name, c.first)
			if got := len(c.last.Composed); got != tc.resources {
				t.Errorf("%s: composed %d resources, want %d", tc.reason, got, tc.resources)
			}
			validate(t, c)
			tc.check(t, compcheck.Applied(c.input, c.last.XR), c.composed)
		})
	}
}

// TestAWSClusterNeedsThreeFailureDomains: the AWS Composition places subnets
// in the first three failure domains; with fewer it composes what it can and
// says, as an event on the XR, which resources wait for a failure domain; the
// XR never becomes ready.
func TestAWSClusterNeedsThreeFailureDomains(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	comp := must(compositions.Read("aws/cluster.yaml"))
	xr := testdata(t, "aws-cluster-two-zones.yaml")
	var observed []*unstructured.Unstructured
	var out *render.Output
	for range 4 {
		var err error
		if out, err = engine.Render(ctx, render.Input{XR: xr, Composition: comp, XRD: xrd(t, xr), Observed: observed}); err != nil {
			t.Fatal(err)
		}
		xr, observed = compcheck.Applied(xr, out.XR), compcheck.ProvideAll(out.Composed)
	}
	if c := condition(out.XR, "Ready"); c["status"] == "True" {
		t.Errorf("XR is ready with two of three failure domains: %v", c)
	}
	for _, missing := range []string{"subnet-private-2", "subnet-public-2", "private-route-table-association-2", "public-route-table-association-2"} {
		if !hasEvent(out.Events, "Warning", fmt.Sprintf("not adding new composed resource %q", missing)) {
			t.Errorf("no warning event names %s; events: %+v", missing, out.Events)
		}
	}
	if got := str(t, byTemplate(out.Composed)["control-plane-load-balancer"], "spec.forProvider.subnetSelector.matchLabels[capxp.dev/subnet-role]"); got != "Private" {
		t.Errorf("an Internal load balancer goes in the private subnets, got %q", got)
	}
}

// TestBadInputsFailClearly: inputs a Composition cannot use fail the
// pipeline with a message naming the field, which Crossplane reports on the
// XR's Synced condition.
func TestBadInputsFailClearly(t *testing.T) {
	cases := map[string]struct {
		reason string
		patch  map[string]any
		want   string
	}{
		"NetworkNotA16": {
			reason: "the AWS Composition carves subnets out of a /16",
			patch:  map[string]any{"spec.parameters.network.cidrBlock": "10.20.0.0/20"},
			want:   "had no matches",
		},
		"UnknownLoadBalancerScheme": {
			reason: "a scheme the Composition does not know cannot be mapped",
			patch:  map[string]any{"spec.parameters.controlPlaneLoadBalancer.scheme": "Dualstack"},
			want:   "Dualstack",
		},
		"AnotherProvidersCredentials": {
			reason: "managed resources name only a kind and a name: a grant of kubernetes.m.crossplane.io's default must not become the use of aws.m.upbound.io's default",
			patch: map[string]any{"spec.providerConfigRef": map[string]any{
				"apiGroup": "kubernetes.m.crossplane.io", "kind": "ClusterProviderConfig", "name": "default",
			}},
			want: "kubernetes.m.crossplane.io/ClusterProviderConfig",
		},
	}
	comp := must(compositions.Read("aws/cluster.yaml"))
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			xr := testdata(t, "aws-cluster.yaml")
			p := fieldpath.Pave(xr.Object)
			for f, v := range tc.patch {
				if err := p.SetValue(f, v); err != nil {
					t.Fatal(err)
				}
			}
			_, err := engine.Render(t.Context(), render.Input{XR: xr, Composition: comp, XRD: xrd(t, xr)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: got error %v, want one containing %q", tc.reason, err, tc.want)
			}
		})
	}
}

// TestDefaultCompositions: the XRDs' default Compositions ship, and every
// Composition carries the backend label clusters select it by.
func TestDefaultCompositions(t *testing.T) {
	names := map[string]*unstructured.Unstructured{}
	for _, b := range compositions.Backends {
		comps, err := compositions.ReadDir(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range comps {
			names[c.GetName()] = c
			// The folder's name, or a variant of it (aws-eks: EKS's
			// managed nodes, which a selector of aws must not match).
			if got := c.GetLabels()[compositions.LabelBackend]; got != b && !strings.HasPrefix(got, b+"-") {
				t.Errorf("Composition %s in %s/ has %s=%q, want %s or %s-VARIANT", c.GetName(), b, compositions.LabelBackend, got, b, b)
			}
		}
	}
	xrds, err := compositions.ReadDir("xrds")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range xrds {
		def, _, _ := unstructured.NestedString(x.Object, "spec", "defaultCompositionRef", "name")
		kind, _, _ := unstructured.NestedString(x.Object, "spec", "names", "kind")
		if def == "" && (kind == "CrossplaneControlPlane" || kind == "CrossplaneMachinePool") {
			// No production backend ships for them yet: every XR selects one.
			continue
		}
		c, ok := names[def]
		if !ok {
			t.Errorf("XRD %s defaults to Composition %q, which does not ship", x.GetName(), def)
			continue
		}
		if got, _, _ := unstructured.NestedString(c.Object, "spec", "compositeTypeRef", "kind"); got != kind {
			t.Errorf("XRD %s defaults to Composition %s, which composes %s", x.GetName(), def, got)
		}
	}
}
