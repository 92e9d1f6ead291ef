// Package aws proves the aws backend against an AWS API: the real
// provider-upjet-aws family, run by the local plane as Crossplane's package
// runtime would, calls moto_server on loopback. Nothing is played by the
// test: every AWS resource is created, described and deleted through the
// AWS API. make test-aws runs it (the providers' cold build is long).
package aws

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/internal/dev/lifeline"
	"github.com/capxp/cluster-api-provider-crossplane/internal/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
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

// TestAWSMachines runs CAPI machines on the aws backend: a
// MachineDeployment of CrossplaneMachines composed by crossplanemachine-aws
// (a Secrets Manager secret holding the bootstrap data, and an EC2
// instance), in a network the team made with the same providers (a VPC, a
// subnet and a security group), which a bring-your-own CrossplaneCluster
// reports, under a managed control plane on the local backend. The plane
// registers each instance's Node, as its kubelet would. It pauses and resumes the Cluster, rolls the workers onto
// another instance type and deletes the cluster, describing the emulator
// through the AWS API at every step; at the end it holds nothing of it.
//
// The cluster Composition (crossplanecluster-aws) is not provisioned here:
// its security group rules cannot be created by provider-aws-ec2 v2.5.0,
// the newest release buildable here (docs/decisions.md).
func TestAWSMachines(t *testing.T) {
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
	// What a platform team prepares in its account before its first
	// cluster: the instance profile the machines run as (the aws machine
	// Composition names it), and an image.
	if err := api.instanceProfile(ctx, "capxp-nodes"); err != nil {
		t.Fatal(err)
	}
	ami, err := api.image(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range credentials(p.AWSEndpoint()) {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("cannot create %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	start := time.Now()
	vpc, subnet, sg := makeNetwork(ctx, t, c)
	t.Logf("the team's network (VPC %s, subnet %s, security group %s) created in %s", vpc, subnet, sg, time.Since(start).Round(time.Second))
	for _, o := range cluster(vpc, subnet, sg, ami, p.Workload.Kubeconfig) {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("cannot create %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}

	// Provisioned: each Machine's providerID names a running instance in
	// the team's subnet, and each machine's bootstrap data is a secret.
	start = time.Now()
	provisioned(ctx, t, c, api, "m6i.large")
	t.Logf("%d machines provisioned in %s", workers, time.Since(start).Round(time.Second))
	counts, err := api.count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the emulator holds: %v", counts)
	for kind, want := range map[string]int{"VPC": 1, "Subnet": 1, "SecurityGroup": 1, "Instance": workers, "Secret": workers} {
		if counts[kind] != want {
			t.Errorf("the emulator holds %d %s, want %d", counts[kind], kind, want)
		}
	}

	// Paused, a scaled MachineDeployment launches nothing; resumed, it does.
	setPaused(ctx, t, c, true)
	scale(ctx, t, c, workers+1)
	time.Sleep(20 * time.Second)
	if is, err := api.instances(ctx, "pending", "running"); err != nil || len(is) != workers {
		t.Errorf("a paused cluster launched instances: %d running (%v), want %d", len(is), err, workers)
	}
	setPaused(ctx, t, c, false)
	eventually(t, "the resumed cluster runs one more instance", 5*time.Minute, func() error {
		is, err := api.instances(ctx, "pending", "running")
		if err != nil {
			return err
		}
		if len(is) != workers+1 {
			return fmt.Errorf("%d running", len(is))
		}
		return nil
	})
	scale(ctx, t, c, workers)

	// A new machine template rolls every worker onto another instance type.
	rollout(ctx, t, c, sg, ami)
	provisioned(ctx, t, c, api, "m6i.xlarge")

	// Deleted, and the team's network after it: nothing is left.
	if err := c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cluster and its machines are gone", 10*time.Minute, func() error {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &clusterv1.Cluster{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Cluster is still there (%v)", err)
		}
		return noneLeft(ctx, c, "Instance", "Secret")
	})
	for _, o := range network() {
		if err := c.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the team's network is gone", 5*time.Minute, func() error {
		return noneLeft(ctx, c, "VPC", "Subnet", "SecurityGroup")
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

// noneLeft says which managed resources of the kinds remain in the
// namespace.
func noneLeft(ctx context.Context, c client.Client, kinds ...string) error {
	for _, k := range kinds {
		l := &unstructured.UnstructuredList{}
		group := "ec2.aws.m.upbound.io"
		if k == "Secret" {
			group = "secretsmanager.aws.m.upbound.io"
		}
		l.SetAPIVersion(group + "/v1beta1")
		l.SetKind(k + "List")
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(l.Items) > 0 {
			return fmt.Errorf("%d %s left", len(l.Items), k)
		}
	}
	return nil
}

// provisioned waits until every Machine of the cluster has a providerID
// naming a running instance of the given type in the team's subnet, one per
// Machine, its infrastructure provisioned.
func provisioned(ctx context.Context, t *testing.T, c client.Client, api awsAPI, size string) {
	t.Helper()
	eventually(t, "the machines run in the emulator as "+size+" instances", 10*time.Minute, func() error {
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
		if len(ms.Items) != workers || len(is) != workers {
			return fmt.Errorf("%d Machines, %d running instances", len(ms.Items), len(is))
		}
		for i := range ms.Items {
			m := &ms.Items[i]
			inst, ok := running[m.Spec.ProviderID]
			if !ok || inst.Type != size || !ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) {
				return fmt.Errorf("Machine %s: providerID %q names no running %s instance (%v)", m.Name, m.Spec.ProviderID, size, is)
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

func rollout(ctx context.Context, t *testing.T, c client.Client, sg, ami string) {
	t.Helper()
	if err := c.Create(ctx, machineTemplate(name+"-workers-v2", "m6i.xlarge", sg, ami)); err != nil {
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

// machineTemplate is a worker template on the aws backend; the security
// group is the team's, which the cluster does not report.
func machineTemplate(tname, size, sg, ami string) client.Object {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": infrav1.GroupVersion.String(), "kind": infrav1.CrossplaneMachineTemplateKind,
		"metadata": map[string]any{"namespace": ns, "name": tname},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"parameters": map[string]any{"size": size, "image": ami},
			"network":    map[string]any{"securityGroupIDs": []any{sg}},
			"crossplane": map[string]any{"compositionSelector": map[string]any{"matchLabels": map[string]any{
				compositions.LabelBackend: "aws", compositions.LabelMachineRole: "worker"}}},
		}}},
	}}
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
					"services":          []any{"ec2", "elbv2", "secretsmanager", "sts", "iam"},
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

// network is the team's network, managed resources of the same providers.
func network() []client.Object {
	mr := func(kind, mrName string, forProvider map[string]any) *unstructured.Unstructured {
		forProvider["region"] = region
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "ec2.aws.m.upbound.io/v1beta1", "kind": kind,
			"metadata": map[string]any{"namespace": ns, "name": mrName},
			"spec": map[string]any{
				"providerConfigRef": map[string]any{"kind": "ProviderConfig", "name": creds},
				"forProvider":       forProvider,
			},
		}}
	}
	vpcRef := map[string]any{"name": "team"}
	return []client.Object{
		mr("VPC", "team", map[string]any{"cidrBlock": "10.30.0.0/16"}),
		mr("Subnet", "team-a", map[string]any{"cidrBlock": "10.30.1.0/24", "availabilityZone": region + "a", "vpcIdRef": vpcRef}),
		mr("SecurityGroup", "team-nodes", map[string]any{"name": "team-nodes", "description": "the team's nodes", "vpcIdRef": vpcRef}),
	}
}

// makeNetwork creates the team's network and returns its IDs once the
// provider reports them.
func makeNetwork(ctx context.Context, t *testing.T, c client.Client) (vpc, subnet, sg string) {
	t.Helper()
	objs := network()
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	ids := make([]string, len(objs))
	eventually(t, "the team's network is ready", 5*time.Minute, func() error {
		for i, o := range objs {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(o.GetObjectKind().GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), u); err != nil {
				return err
			}
			id, _, _ := unstructured.NestedString(u.Object, "status", "atProvider", "id")
			if id == "" {
				return fmt.Errorf("%s %s has no ID yet", u.GetKind(), u.GetName())
			}
			ids[i] = id
		}
		return nil
	})
	return ids[0], ids[1], ids[2]
}

// cluster is the team's cluster: a bring-your-own CrossplaneCluster that
// reports the team's network and names the team's credentials, which its
// machines inherit; a managed control plane on the local backend (the
// plane's workload API server, where the instances' Nodes register); and a
// MachineDeployment of CrossplaneMachines on the aws backend, whose
// bootstrap data a Secret holds.
func cluster(vpc, subnet, sg, ami string, kubeconfig []byte) []client.Object {
	return []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workload-kubeconfig"}, Data: map[string][]byte{"kubeconfig": kubeconfig}},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubernetes.m.crossplane.io/v1alpha1", "kind": "ProviderConfig",
			"metadata": map[string]any{"namespace": ns, "name": "workload"},
			"spec": map[string]any{"credentials": map[string]any{"source": "Secret",
				"secretRef": map[string]any{"namespace": ns, "name": "workload-kubeconfig", "key": "kubeconfig"}}},
		}},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": infrav1.GroupVersion.String(), "kind": infrav1.CrossplaneControlPlaneKind,
			"metadata": map[string]any{"namespace": ns, "name": name},
			"spec": map[string]any{
				"version":           "v1.36.3",
				"providerConfigRef": map[string]any{"apiGroup": "kubernetes.m.crossplane.io", "kind": "ProviderConfig", "name": "workload"},
				"crossplane":        map[string]any{"compositionSelector": map[string]any{"matchLabels": map[string]any{compositions.LabelBackend: "local"}}},
			},
		}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-bootstrap", Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type:       clusterv1.ClusterSecretType,
			StringData: map[string]string{"format": "cloud-config", "value": "#cloud-config\n"},
		},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": infrav1.GroupVersion.String(), "kind": infrav1.CrossplaneClusterKind,
			"metadata": map[string]any{"namespace": ns, "name": name},
			"spec": map[string]any{
				"controlPlaneEndpoint": map[string]any{"host": "api.alpha.example.org", "port": int64(6443)},
				"parameters": map[string]any{
					"region":         region,
					"failureDomains": []any{map[string]any{"name": region + "a", "controlPlane": true}},
					"network": map[string]any{"id": vpc, "subnets": []any{
						map[string]any{"id": subnet, "failureDomain": region + "a", "role": "Private"}}},
				},
				"providerConfigRef": map[string]any{"apiGroup": "aws.m.upbound.io", "kind": "ProviderConfig", "name": creds},
				"crossplane":        map[string]any{"compositionSelector": map[string]any{"matchLabels": map[string]any{compositions.LabelBackend: "byo"}}},
			},
		}},
		&clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: clusterv1.ClusterSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.CrossplaneClusterKind, Name: name},
				ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.CrossplaneControlPlaneKind, Name: name},
			},
		},
		machineTemplate(name+"-workers", "m6i.large", sg, ami),
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
						Version:       "v1.36.3",
						FailureDomain: region + "a",
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
	cli, err := tools.Dir(envtest.ToolsDir()).Binary("crossplane-cli", plane.CrossplaneCLIVersion)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin", "capxp")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/capxp")
	build.Dir = envtest.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cannot build capxp: %v\n%s", err, out)
	}
	rel := filepath.Join(dir, "release")
	if err := os.MkdirAll(rel, 0o750); err != nil {
		t.Fatal(err)
	}
	if _, err := release.Write(ctx, rel, release.Options{}, bin, runtime.GOARCH, cli); err != nil {
		t.Fatal(err)
	}
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
