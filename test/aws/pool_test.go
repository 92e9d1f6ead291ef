package aws

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/compositions"
)

const pool = name + "-pool-0"

// machinePool adds a MachinePool to the cluster on crossplanemachinepool-aws
// and scales it: its provider IDs must be exactly the running instances of
// one auto scaling group of the pool's size, listed by function-asg-instances
// with the team's credentials, and CAPI must count their Nodes ready.
func machinePool(ctx context.Context, t *testing.T, c client.Client, api awsAPI, ami string) {
	t.Helper()
	for _, o := range poolObjects(ami) {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("cannot create %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	start := time.Now()
	poolRuns(ctx, t, c, api, 2)
	t.Logf("the machine pool's 2 instances run and their Nodes are ready in %s", time.Since(start).Round(time.Second))
	start = time.Now()
	update(ctx, t, c, &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pool}}, func(o client.Object) {
		o.(*clusterv1.MachinePool).Spec.Replicas = ptr.To[int32](3)
	})
	poolRuns(ctx, t, c, api, 3)
	t.Logf("the machine pool scaled to 3 in %s", time.Since(start).Round(time.Second))
}

// poolRuns waits until the auto scaling group runs n instances, the
// MachinePool's provider IDs are theirs and CAPI counts n ready replicas.
func poolRuns(ctx context.Context, t *testing.T, c client.Client, api awsAPI, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("the machine pool runs %d instances of its group, their Nodes ready", n), 10*time.Minute, func() error {
		groups, err := api.autoScalingGroups(ctx)
		if err != nil {
			return err
		}
		if len(groups) != 1 || groups[0].Desired != n {
			return fmt.Errorf("the emulator's auto scaling groups: %+v", groups)
		}
		running := map[string]bool{}
		is, err := api.instances(ctx, "pending", "running")
		if err != nil {
			return err
		}
		for _, i := range is {
			running[i.ID] = true
		}
		var want []string
		for _, i := range groups[0].Instances {
			if !running[i.ID] {
				return fmt.Errorf("instance %s of the group does not run", i.ID)
			}
			want = append(want, fmt.Sprintf("aws:///%s/%s", i.Zone, i.ID))
		}
		slices.Sort(want)
		mp := &clusterv1.MachinePool{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: pool}, mp); err != nil {
			return err
		}
		got := slices.Sorted(slices.Values(mp.Spec.ProviderIDList))
		if !slices.Equal(got, want) {
			return fmt.Errorf("the MachinePool's providerIDList is %q, the group's instances %q", got, want)
		}
		if ptr.Deref(mp.Status.ReadyReplicas, 0) != int32(n) { //nolint:gosec // small.
			return fmt.Errorf("the MachinePool has %d ready replicas (conditions %v)", ptr.Deref(mp.Status.ReadyReplicas, 0), mp.Status.Conditions)
		}
		return nil
	})
}

// poolObjects are a MachinePool of two workers over two failure domains,
// its bootstrap data and its CrossplaneMachinePool on the aws backend.
func poolObjects(ami string) []client.Object {
	return []client.Object{
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pool + "-bootstrap", Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type:       clusterv1.ClusterSecretType,
			StringData: map[string]string{"format": "cloud-config", "value": "#cloud-config\n"},
		},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": infrav1.GroupVersion.String(), "kind": infrav1.CrossplaneMachinePoolKind,
			"metadata": map[string]any{"namespace": ns, "name": pool},
			"spec": map[string]any{
				"parameters": map[string]any{"size": "m6i.large", "image": ami},
				"crossplane": map[string]any{"compositionSelector": map[string]any{"matchLabels": map[string]any{compositions.LabelBackend: "aws"}}},
			},
		}},
		&clusterv1.MachinePool{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pool},
			Spec: clusterv1.MachinePoolSpec{
				ClusterName:    name,
				Replicas:       ptr.To[int32](2),
				FailureDomains: []string{region + "a", region + "b"},
				Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
					ClusterName: name,
					Version:     "v1.36.5",
					Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(pool + "-bootstrap")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: infrav1.CrossplaneMachinePoolKind, Name: pool},
				}},
			},
		},
	}
}
