// Package aws proves the aws backend against an AWS API: the real
// provider-upjet-aws family, run by the local plane as Crossplane's package
// runtime would, calls moto_server on loopback. Nothing is played by the
// test: every AWS resource is created, described and deleted through the
// AWS API. make test-aws runs it (the providers' cold build is long).
package aws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/dev/lifeline"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	ctlsetup "github.com/capxp/cluster-api-provider-crossplane/test/clusterctl"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
	"github.com/capxp/cluster-api-provider-crossplane/test/wait"
)

func TestMain(m *testing.M) {
	// The plane starts etcd and kube-apiserver through links to this test
	// binary, so that they die with it.
	lifeline.Main()
	os.Exit(m.Run())
}

const (
	ns      = "team-aws"
	name    = "alpha"
	region  = "eu-west-1"
	creds   = "moto"
	workers = 2
)

var eventually = wait.Options{Every: 2 * time.Second}.Eventually

// TestAWSCluster runs a CAPI cluster on the aws backend: a
// CrossplaneCluster composed by crossplanecluster-aws (a VPC over three
// failure domains, subnets, gateways, routes, security groups and their
// rules, and the API load balancer), a control-plane Machine composed by
// crossplanemachine-aws-control-plane (an instance registered behind the
// load balancer) and a MachineDeployment of workers composed by
// crossplanemachine-aws (each a Secrets Manager secret with its bootstrap
// data and an instance). The Cluster's control plane is its control-plane
// Machines, so its endpoint is the load balancer's. The plane registers each
// instance's Node, as its kubelet would. It pauses and resumes the Cluster,
// rolls the workers onto another instance type and deletes the cluster,
// describing the emulator through the AWS API at every step; at the end it
// holds nothing of it.
func TestAWSCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	p := startPlane(ctx, t)
	c := p.Management().Client
	api := awsAPI{endpoint: p.AWSEndpoint(), region: region}

	before, err := api.count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the emulator before: %v", before)
	ami := prepareAccount(ctx, t, api)
	for _, o := range append(credentials(p.AWSEndpoint()), cluster(ami, p.Workload.Kubeconfig)...) {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("cannot create %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}

	// The network and the load balancer: the Cluster's endpoint is the
	// load balancer's DNS name.
	start := time.Now()
	eventually(t, "the cluster's infrastructure is provisioned, its endpoint the load balancer's", 10*time.Minute, func() error {
		cl := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl); err != nil {
			return err
		}
		if !ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false) {
			return fmt.Errorf("infrastructure not provisioned: %v", cl.Status.Conditions)
		}
		lbs, err := api.loadBalancers(ctx)
		if err != nil {
			return err
		}
		if len(lbs) != 1 || cl.Spec.ControlPlaneEndpoint.Host != lbs[0].DNSName {
			return fmt.Errorf("the Cluster's endpoint is %q, the emulator's load balancers %v", cl.Spec.ControlPlaneEndpoint.Host, lbs)
		}
		return nil
	})
	t.Logf("the cluster's infrastructure provisioned in %s", time.Since(start).Round(time.Second))
	counts, err := api.count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the emulator holds: %v", counts)
	for kind, want := range map[string]int{
		"VPC": 1, "Subnet": 6, "InternetGateway": 1, "EIP": 1, "NATGateway": 1, "RouteTable": 2,
		"SecurityGroup": 2, "SecurityGroupRule": 7, "LoadBalancer": 1, "TargetGroup": 1, "Listener": 1,
	} {
		if got := counts[kind] - before[kind]; got != want {
			t.Errorf("the emulator holds %d more %s, want %d", got, kind, want)
		}
	}

	// Provisioned: each Machine's providerID names a running instance, the
	// control plane's registered behind the load balancer, and the
	// control plane is initialized once its Node has registered.
	start = time.Now()
	provisioned(ctx, t, c, api, "m6i.large")
	eventually(t, "the control plane is initialized and its instance behind the load balancer", 5*time.Minute, func() error {
		cl := &clusterv1.Cluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl); err != nil {
			return err
		}
		// Without a control plane provider, CAPI reports it only as a
		// condition.
		if !conditions.IsTrue(cl, clusterv1.ClusterControlPlaneInitializedCondition) {
			return errors.New("the control plane is not initialized")
		}
		m := &clusterv1.Machine{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-cp-0"}, m); err != nil {
			return err
		}
		targets, err := api.targets(ctx)
		if err != nil {
			return err
		}
		if _, instance, _ := strings.Cut(strings.TrimPrefix(m.Spec.ProviderID, "aws:///"), "/"); !slices.Equal(targets, []string{instance}) {
			return fmt.Errorf("the load balancer's targets are %v, want the control plane's instance %q", targets, instance)
		}
		return nil
	})
	t.Logf("%d machines provisioned in %s", workers+1, time.Since(start).Round(time.Second))
	counts, err = api.count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[string]int{"Instance": workers + 1, "Secret": workers + 1} {
		if got := counts[kind] - before[kind]; got != want {
			t.Errorf("the emulator holds %d more %s, want %d", got, kind, want)
		}
	}
	ownBootstrapData(ctx, t, c, api)

	// Paused, a scaled MachineDeployment launches nothing; resumed, it does.
	setPaused(ctx, t, c, true)
	scale(ctx, t, c, workers+1)
	time.Sleep(20 * time.Second)
	if is, err := api.instances(ctx, "pending", "running"); err != nil || len(is) != workers+1 {
		t.Errorf("a paused cluster launched instances: %d running (%v), want %d", len(is), err, workers+1)
	}
	setPaused(ctx, t, c, false)
	eventually(t, "the resumed cluster runs one more instance", 5*time.Minute, func() error {
		is, err := api.instances(ctx, "pending", "running")
		if err != nil {
			return err
		}
		if len(is) != workers+2 {
			return fmt.Errorf("%d running", len(is))
		}
		return nil
	})
	scale(ctx, t, c, workers)

	// A new machine template rolls every worker onto another instance type.
	rollout(ctx, t, c, ami)
	provisioned(ctx, t, c, api, "m6i.xlarge")

	// A machine pool: an auto scaling group, scaled.
	machinePool(ctx, t, c, api, ami)

	// Deleted: nothing is left.
	deleteCluster(ctx, t, c, api, before)
}

// ownBootstrapData checks, in the emulator, that each machine's bootstrap
// secret carries the resource policy that denies every instance but the
// machine's own (the emulator stores policies; it does not evaluate them).
func ownBootstrapData(ctx context.Context, t *testing.T, c client.Client, api awsAPI) {
	t.Helper()
	ms := &clusterv1.MachineList{}
	if err := c.List(ctx, ms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range ms.Items {
		m := &ms.Items[i]
		_, instance, _ := strings.Cut(strings.TrimPrefix(m.Spec.ProviderID, "aws:///"), "/")
		secret := "capxp/" + ns + "/" + m.Spec.InfrastructureRef.Name
		eventually(t, "the bootstrap secret of "+m.Name+" is readable only by its instance", time.Minute, func() error {
			p, err := api.secretPolicy(ctx, secret)
			if err != nil {
				return err
			}
			var doc struct {
				Statement []struct {
					Effect    string
					Condition map[string]map[string]string
				}
			}
			if err := json.Unmarshal([]byte(p), &doc); err != nil {
				return fmt.Errorf("secret %s's policy %q: %w", secret, p, err)
			}
			if instance == "" || len(doc.Statement) != 1 || doc.Statement[0].Effect != "Deny" ||
				!strings.HasSuffix(doc.Statement[0].Condition["StringNotEquals"]["ec2:SourceInstanceARN"], ":instance/"+instance) {
				return fmt.Errorf("secret %s's policy does not deny every instance but %s: %s", secret, instance, p)
			}
			return nil
		})
	}
}

// prepareAccount makes what a platform team prepares in its account before
// its first cluster: the instance profiles the machines run as (the aws
// machine Compositions name them); it returns an image of the emulator's
// catalog for them.
func prepareAccount(ctx context.Context, t *testing.T, api awsAPI) string {
	t.Helper()
	for _, profile := range []string{"capxp-nodes", "capxp-control-plane"} {
		if err := api.instanceProfile(ctx, profile); err != nil {
			t.Fatal(err)
		}
	}
	ami, err := api.image(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ami
}

// deleteCluster deletes the Cluster and waits until it, its machines and
// its network are gone; the emulator must then hold what it held before.
func deleteCluster(ctx context.Context, t *testing.T, c client.Client, api awsAPI, before map[string]int) {
	t.Helper()
	if err := c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cluster, its machines and its network are gone", 10*time.Minute, func() error {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &clusterv1.Cluster{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Cluster is still there (%v)", err)
		}
		return noneLeft(ctx, c)
	})
	left, err := api.count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for kind, n := range left {
		if n != before[kind] {
			kept = append(kept, fmt.Sprintf("%d %s", n-before[kind], kind))
		}
	}
	sort.Strings(kept)
	if len(kept) > 0 {
		t.Errorf("the emulator still holds %s", strings.Join(kept, ", "))
	}
	t.Logf("the emulator after the deletion: %v", left)
}

// composedKinds are the managed resource kinds the aws Compositions
// compose, by group.
var composedKinds = map[string][]string{
	"ec2.aws.m.upbound.io": {"VPC", "Subnet", "InternetGateway", "EIP", "NATGateway", "RouteTable", "Route",
		"RouteTableAssociation", "SecurityGroup", "SecurityGroupRule", "Instance", "LaunchTemplate"},
	"autoscaling.aws.m.upbound.io":    {"AutoscalingGroup"},
	"elbv2.aws.m.upbound.io":          {"LB", "LBTargetGroup", "LBListener", "LBTargetGroupAttachment"},
	"secretsmanager.aws.m.upbound.io": {"Secret", "SecretPolicy", "SecretVersion"},
}

// noneLeft says which managed resources the aws Compositions compose
// remain in the namespace.
func noneLeft(ctx context.Context, c client.Client) error {
	left := map[string]int{}
	if err := eachManaged(ctx, c, func(u *unstructured.Unstructured) error { left[u.GetKind()]++; return nil }); err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("left: %v", left)
	}
	return nil
}

// provisioned waits until every Machine of the cluster has a providerID
// naming a running instance, one per Machine, its infrastructure
// provisioned, and the workers' instances are of the given type.
func provisioned(ctx context.Context, t *testing.T, c client.Client, api awsAPI, size string) {
	t.Helper()
	eventually(t, "the machines run in the emulator, the workers as "+size+" instances", 10*time.Minute, func() error {
		ms := &clusterv1.MachineList{}
		if err := c.List(ctx, ms, client.InNamespace(ns)); err != nil {
			return err
		}
		is, err := api.instances(ctx, "running")
		if err != nil {
			return err
		}
		running := map[string]instance{}
		for _, i := range is {
			running[fmt.Sprintf("aws:///%s/%s", i.Zone, i.ID)] = i
		}
		if len(ms.Items) != workers+1 || len(is) != workers+1 {
			return fmt.Errorf("%d Machines, %d running instances", len(ms.Items), len(is))
		}
		for i := range ms.Items {
			m := &ms.Items[i]
			inst, ok := running[m.Spec.ProviderID]
			_, controlPlane := m.Labels[clusterv1.MachineControlPlaneLabel]
			if !ok || (!controlPlane && inst.Type != size) || !ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) {
				return fmt.Errorf("Machine %s: providerID %q names no running instance of its type (%v)", m.Name, m.Spec.ProviderID, is)
			}
		}
		return nil
	})
}

func setPaused(ctx context.Context, t *testing.T, c client.Client, paused bool) {
	t.Helper()
	update(ctx, t, c, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, func(o client.Object) {
		o.(*clusterv1.Cluster).Spec.Paused = ptr.To(paused)
	})
}

func scale(ctx context.Context, t *testing.T, c client.Client, replicas int32) {
	t.Helper()
	update(ctx, t, c, &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-workers"}}, func(o client.Object) {
		o.(*clusterv1.MachineDeployment).Spec.Replicas = ptr.To(replicas)
	})
}

func rollout(ctx context.Context, t *testing.T, c client.Client, ami string) {
	t.Helper()
	if err := c.Create(ctx, machineTemplate(name+"-workers-v2", "m6i.xlarge", ami)); err != nil {
		t.Fatal(err)
	}
	update(ctx, t, c, &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-workers"}}, func(o client.Object) {
		o.(*clusterv1.MachineDeployment).Spec.Template.Spec.InfrastructureRef.Name = name + "-workers-v2"
	})
}

// update changes an object as read, again when CAPI wrote it meanwhile.
func update(ctx context.Context, t *testing.T, c client.Client, o client.Object, change func(client.Object)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return err
		}
		change(o)
		return c.Update(ctx, o)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// machineTemplate is a worker template on the aws backend: the bridge
// injects the cluster's network (the subnet of the machine's failure
// domain, the nodes' security group) and credentials.
func machineTemplate(tname, size, ami string) client.Object {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": infrav1.GroupVersion.String(), "kind": infrav1.CrossplaneMachineTemplateKind,
		"metadata": map[string]any{"namespace": ns, "name": tname},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"parameters": map[string]any{"size": size, "image": ami},
			"crossplane": awsComposition("worker"),
		}}},
	}}
}

// awsComposition selects the aws Composition of a machine role.
func awsComposition(role string) map[string]any {
	return map[string]any{"compositionSelector": map[string]any{"matchLabels": map[string]any{
		compositions.LabelBackend: "aws", compositions.LabelMachineRole: role}}}
}

// credentials are the team's for the emulator.
func credentials(endpoint string) []client.Object {
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: creds},
			StringData: map[string]string{"credentials": "[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n"}},
		// The emulator's endpoint for every service the Compositions
		// call; moto checks no credentials and has no instance metadata.
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "aws.m.upbound.io/v1beta1", "kind": "ProviderConfig",
			"metadata": map[string]any{"namespace": ns, "name": creds},
			"spec": map[string]any{
				"credentials": map[string]any{"source": "Secret", "secretRef": map[string]any{"namespace": ns, "name": creds, "key": "credentials"}},
				"endpoint": map[string]any{
					"hostnameImmutable": true,
					"services":          []any{"ec2", "elbv2", "secretsmanager", "sts", "iam", "autoscaling"},
					"url":               map[string]any{"type": "Static", "static": endpoint},
				},
				"skip_credentials_validation": true,
				"skip_metadata_api_check":     true,
				"skip_region_validation":      true,
				"skip_requesting_account_id":  true,
			},
		}},
	}
}

// cluster is the team's cluster on the aws backend: a CrossplaneCluster
// over three failure domains, one control-plane Machine (the Cluster has no
// control plane provider: its control plane is its control-plane Machines,
// as CAPI allows) and a MachineDeployment of workers, whose bootstrap data
// Secrets hold. Without a control plane provider, the cluster's kubeconfig
// is the team's to give: the plane's workload API server's, where the
// instances' Nodes register.
func cluster(ami string, kubeconfig []byte) []client.Object {
	bootstrap := func(secret string) client.Object {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret, Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type:       clusterv1.ClusterSecretType,
			StringData: map[string]string{"format": "cloud-config", "value": "#cloud-config\n"},
		}
	}
	zone := func(z string, controlPlane bool) map[string]any {
		return map[string]any{"name": region + z, "controlPlane": controlPlane}
	}
	return []client.Object{
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-kubeconfig", Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type:       clusterv1.ClusterSecretType,
			Data:       map[string][]byte{"value": kubeconfig},
		},
		bootstrap(name + "-cp-0-bootstrap"),
		bootstrap(name + "-bootstrap"),
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": infrav1.GroupVersion.String(), "kind": infrav1.CrossplaneClusterKind,
			"metadata": map[string]any{"namespace": ns, "name": name},
			"spec": map[string]any{
				"parameters": map[string]any{
					"region":         region,
					"network":        map[string]any{"cidrBlock": "10.20.0.0/16"},
					"failureDomains": []any{zone("a", true), zone("b", true), zone("c", false)},
				},
				"providerConfigRef": map[string]any{"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": creds},
				"crossplane":        map[string]any{"compositionSelector": map[string]any{"matchLabels": map[string]any{compositions.LabelBackend: "aws"}}},
			},
		}},
		&clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.CrossplaneClusterKind, Name: name}},
		},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": infrav1.GroupVersion.String(), "kind": infrav1.CrossplaneMachineKind,
			"metadata": map[string]any{"namespace": ns, "name": name + "-cp-0"},
			"spec": map[string]any{
				"parameters": map[string]any{"size": "m6i.large", "image": ami},
				"crossplane": awsComposition("control-plane"),
			},
		}},
		&clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-cp-0", Labels: map[string]string{clusterv1.MachineControlPlaneLabel: ""}},
			Spec: clusterv1.MachineSpec{
				ClusterName:   name,
				Version:       "v1.36.5",
				FailureDomain: region + "a",
				Bootstrap:     clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-cp-0-bootstrap")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.CrossplaneMachineKind, Name: name + "-cp-0"},
			},
		},
		machineTemplate(name+"-workers", "m6i.large", ami),
		&clusterv1.MachineDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-workers"},
			Spec: clusterv1.MachineDeploymentSpec{
				ClusterName: name,
				Replicas:    ptr.To[int32](workers),
				Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineDeploymentNameLabel: name + "-workers"}},
				// What CAPI's defaulting webhook would set; the plane runs
				// CAPI's controllers without its webhooks.
				Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
					Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
					RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
						MaxSurge: ptr.To(intstrFromInt(1)), MaxUnavailable: ptr.To(intstrFromInt(0))},
				}},
				Deletion: clusterv1.MachineDeploymentDeletionSpec{Order: clusterv1.NewestMachineSetDeletionOrder},
				Template: clusterv1.MachineTemplateSpec{
					ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{clusterv1.MachineDeploymentNameLabel: name + "-workers"}},
					Spec: clusterv1.MachineSpec{
						ClusterName:   name,
						Version:       "v1.36.5",
						FailureDomain: region + "b",
						Bootstrap:     clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-bootstrap")},
						InfrastructureRef: clusterv1.ContractVersionedObjectReference{
							APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.CrossplaneMachineTemplateKind, Name: name + "-workers"},
					},
				},
			},
		},
	}
}

// startPlane builds a release and starts the local plane from it, with the
// AWS family running against the plane's emulator.
func startPlane(ctx context.Context, t *testing.T) *plane.Plane {
	t.Helper()
	dir := t.TempDir()
	bin, rel, _ := ctlsetup.PackagedRelease(ctx, t, dir)
	p, err := plane.Start(ctx, plane.Options{
		Dir: filepath.Join(dir, "plane"), Tools: tools.Dir(envtest.ToolsDir()),
		Release: rel, ManagerBinary: bin, AWS: true,
		Progress: func(f string, a ...any) { t.Logf("plane: "+f, a...) },
	})
	if err != nil {
		t.Fatalf("%v\n(make test-aws builds what is missing)", err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			keep := filepath.Join(os.TempDir(), "capxp-aws-logs")
			_ = os.RemoveAll(keep)
			if err := os.Rename(p.Dir(), keep); err == nil {
				t.Logf("the plane's logs are in %s", keep)
			}
		}
	})
	return p
}

func intstrFromInt(i int) intstr.IntOrString { return intstr.FromInt32(int32(i)) } //nolint:gosec // small constants.
