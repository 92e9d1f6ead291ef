package plan

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

const ns = "team-a"

var created = metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))

func controlledBy(kind, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
}

func template(version, infra string) clusterv1.MachineTemplateSpec {
	return clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
		ClusterName: "alpha",
		Version:     version,
		Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To("alpha-bootstrap")},
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "CrossplaneMachineTemplate", Name: infra,
		},
	}}
}

// observed is a cluster with a MachineDeployment of two Machines in one
// MachineSet and a KubeadmControlPlane of one.
func observed() *Observed {
	md := clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers", UID: "md"},
		Spec:       clusterv1.MachineDeploymentSpec{ClusterName: "alpha", Replicas: ptr.To[int32](2), Template: template("v1.36.5", "t1")},
	}
	ms := clusterv1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers-abc", UID: "ms", CreationTimestamp: created,
			OwnerReferences: controlledBy("MachineDeployment", "workers", "md")},
		Spec: clusterv1.MachineSetSpec{ClusterName: "alpha", Replicas: ptr.To[int32](2), Template: template("v1.36.5", "t1")},
	}
	machine := func(name, kind, owner string, uid types.UID) clusterv1.Machine {
		return clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: created, OwnerReferences: controlledBy(kind, owner, uid)},
			Spec:       template("v1.36.5", "t1").Spec,
		}
	}
	kcp := controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cp", UID: "kcp"},
		Spec: controlplanev1.KubeadmControlPlaneSpec{Replicas: ptr.To[int32](1), Version: "v1.36.5",
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "CrossplaneMachineTemplate", Name: "t1"},
			}}},
	}
	cp := machine("cp-1", "KubeadmControlPlane", "cp", "kcp")
	cp.OwnerReferences[0].APIVersion = controlplanev1.GroupVersion.String()
	return &Observed{
		Clusters: []clusterv1.Cluster{{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha"},
			Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "cp"}},
		}},
		MachineDeployments:   []clusterv1.MachineDeployment{md},
		MachineSets:          []clusterv1.MachineSet{ms},
		Machines:             []clusterv1.Machine{machine("workers-abc-1", "MachineSet", "workers-abc", "ms"), machine("workers-abc-2", "MachineSet", "workers-abc", "ms"), cp},
		KubeadmControlPlanes: []controlplanev1.KubeadmControlPlane{kcp},
	}
}

// change is a proposed object: apiVersion, kind and name, and the fields
// it sets.
func change(apiVersion, kind, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func mdChange(spec map[string]any) *unstructured.Unstructured {
	return change(clusterv1.GroupVersion.String(), "MachineDeployment", "workers", map[string]any{"spec": spec})
}

func kcpChange(spec map[string]any) *unstructured.Unstructured {
	return change(controlplanev1.GroupVersion.String(), "KubeadmControlPlane", "cp", map[string]any{"spec": spec})
}

func workerTemplate(spec map[string]any) map[string]any {
	return map[string]any{"template": map[string]any{"spec": spec}}
}

func TestPredict(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	kept := func(names ...string) []Machine {
		out := make([]Machine, 0, len(names))
		for _, n := range names {
			owner := "MachineDeployment/workers"
			if n == "cp-1" {
				owner = "KubeadmControlPlane/cp"
			}
			out = append(out, Machine{Name: n, Owner: owner, Verdict: Kept})
		}
		return out
	}
	replaced := func(m Machine, reasons ...string) Machine {
		m.Verdict, m.Reasons = Replaced, reasons
		return m
	}
	cases := map[string]struct {
		proposed    *unstructured.Unstructured
		wantAction  string
		wantMachine []Machine
		wantScales  []Scale
		wantReplace bool
	}{
		"NothingChanges": {
			proposed:    mdChange(map[string]any{"replicas": int64(2)}),
			wantAction:  "unchanged",
			wantMachine: kept("cp-1", "workers-abc-1", "workers-abc-2"),
		},
		"WorkerVersionReplacesWorkers": {
			proposed:   mdChange(workerTemplate(map[string]any{"version": "v1.37.0"})),
			wantAction: "updated",
			wantMachine: func() []Machine {
				m := kept("cp-1", "workers-abc-1", "workers-abc-2")
				m[1] = replaced(m[1], "Version v1.36.5, v1.37.0 required")
				m[2] = replaced(m[2], "Version v1.36.5, v1.37.0 required")
				return m
			}(),
			wantReplace: true,
		},
		"NewInfrastructureTemplateReplacesWorkers": {
			proposed:   mdChange(workerTemplate(map[string]any{"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "CrossplaneMachineTemplate", "name": "t2"}})),
			wantAction: "updated",
			wantMachine: func() []Machine {
				m := kept("cp-1", "workers-abc-1", "workers-abc-2")
				m[1] = replaced(m[1], "CrossplaneMachine is not up-to-date")
				m[2] = replaced(m[2], "CrossplaneMachine is not up-to-date")
				return m
			}(),
			wantReplace: true,
		},
		"LabelsAndDrainTimeoutChangeInPlace": {
			proposed: mdChange(map[string]any{"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"tier": "gold"}},
				"spec":     map[string]any{"deletion": map[string]any{"nodeDrainTimeoutSeconds": int64(60)}},
			}}),
			wantAction:  "updated",
			wantMachine: kept("cp-1", "workers-abc-1", "workers-abc-2"),
		},
		"ScaleUpAddsMachines": {
			proposed:    mdChange(map[string]any{"replicas": int64(3)}),
			wantAction:  "updated",
			wantMachine: kept("cp-1", "workers-abc-1", "workers-abc-2"),
			wantScales:  []Scale{{Owner: "MachineDeployment/workers", From: 2, To: 3}},
		},
		"ScaleDownDeletes": {
			proposed:    mdChange(map[string]any{"replicas": int64(1)}),
			wantAction:  "updated",
			wantMachine: kept("cp-1", "workers-abc-1", "workers-abc-2"),
			wantScales:  []Scale{{Owner: "MachineDeployment/workers", From: 2, To: 1}},
			wantReplace: true,
		},
		"RolloutAfterPassedReplacesWorkers": {
			proposed:   mdChange(map[string]any{"rollout": map[string]any{"after": "2026-11-28T00:00:00Z"}}),
			wantAction: "updated",
			wantMachine: func() []Machine {
				m := kept("cp-1", "workers-abc-1", "workers-abc-2")
				m[1] = replaced(m[1], "rolloutAfter has passed, or its MachineSet is already being rolled out")
				m[2] = replaced(m[2], "rolloutAfter has passed, or its MachineSet is already being rolled out")
				return m
			}(),
			wantReplace: true,
		},
		"RolloutAfterInTheFutureKeeps": {
			proposed:    mdChange(map[string]any{"rollout": map[string]any{"after": "2027-01-01T00:00:00Z"}}),
			wantAction:  "updated",
			wantMachine: kept("cp-1", "workers-abc-1", "workers-abc-2"),
		},
		"OnDeleteLeavesWorkersOutdated": {
			proposed: mdChange(map[string]any{
				"rollout":  map[string]any{"strategy": map[string]any{"type": "OnDelete"}},
				"template": map[string]any{"spec": map[string]any{"version": "v1.37.0"}},
			}),
			wantAction: "updated",
			wantMachine: func() []Machine {
				m := kept("cp-1", "workers-abc-1", "workers-abc-2")
				for i := 1; i < 3; i++ {
					m[i] = replaced(m[i], "Version v1.36.5, v1.37.0 required")
					m[i].Verdict = Outdated
				}
				return m
			}(),
		},
		"ControlPlaneVersionReplacesControlPlane": {
			proposed:   kcpChange(map[string]any{"version": "v1.37.0"}),
			wantAction: "updated",
			wantMachine: func() []Machine {
				m := kept("cp-1", "workers-abc-1", "workers-abc-2")
				m[0] = replaced(m[0], "Version v1.36.5, v1.37.0 required")
				return m
			}(),
			wantReplace: true,
		},
		"ControlPlaneRolloutAfterReplacesControlPlane": {
			proposed:   kcpChange(map[string]any{"rollout": map[string]any{"after": "2026-11-28T00:00:00Z"}}),
			wantAction: "updated",
			wantMachine: func() []Machine {
				m := kept("cp-1", "workers-abc-1", "workers-abc-2")
				m[0] = replaced(m[0], "KubeadmControlPlane spec.rolloutAfter expired")
				return m
			}(),
			wantReplace: true,
		},
		"ControlPlaneScaleUp": {
			proposed:    kcpChange(map[string]any{"replicas": int64(3)}),
			wantAction:  "updated",
			wantMachine: kept("cp-1", "workers-abc-1", "workers-abc-2"),
			wantScales:  []Scale{{Owner: "KubeadmControlPlane/cp", From: 1, To: 3}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var writes int
			c := fake.NewClientBuilder().WithScheme(Scheme()).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
					writes++
					return nil
				},
				Update: func(context.Context, client.WithWatch, client.Object, ...client.UpdateOption) error {
					writes++
					return nil
				},
				Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
					writes++
					return nil
				},
				Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
					writes++
					return nil
				},
			}).Build()
			o := observed()
			p, err := Predict(context.Background(), c, nil, nil, o, []*unstructured.Unstructured{tc.proposed}, now)
			if err != nil {
				t.Fatal(err)
			}
			if writes != 0 {
				t.Errorf("Predict wrote %d times", writes)
			}
			if diff := cmp.Diff(observed(), o, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Predict changed what it observed: -before +after:\n%s", diff)
			}
			if len(p.Changes) != 1 || p.Changes[0].Action != tc.wantAction {
				t.Errorf("changes: %+v, want one %s", p.Changes, tc.wantAction)
			}
			if len(p.Clusters) != 1 {
				t.Fatalf("clusters: %+v, want alpha", p.Clusters)
			}
			if diff := cmp.Diff(tc.wantMachine, p.Clusters[0].Machines, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("machines: -want +got:\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantScales, p.Clusters[0].Scales, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("scales: -want +got:\n%s", diff)
			}
			if got := p.Replaces(); got != tc.wantReplace {
				t.Errorf("Replaces: %t, want %t", got, tc.wantReplace)
			}
		})
	}
}

// BenchmarkPredict decides a new worker version for a cluster of 100
// Machines (97 workers in one MachineSet, a control plane of 3), as plan
// does once it has read them.
func BenchmarkPredict(b *testing.B) {
	o := observed()
	workers := o.Machines[0]
	cp := o.Machines[2]
	o.Machines = nil
	for i := range 97 {
		m := *workers.DeepCopy()
		m.Name = fmt.Sprintf("workers-abc-%d", i)
		o.Machines = append(o.Machines, m)
	}
	for i := range 3 {
		m := *cp.DeepCopy()
		m.Name = fmt.Sprintf("cp-%d", i)
		o.Machines = append(o.Machines, m)
	}
	o.MachineDeployments[0].Spec.Replicas = ptr.To[int32](97)
	o.KubeadmControlPlanes[0].Spec.Replicas = ptr.To[int32](3)
	c := fake.NewClientBuilder().WithScheme(Scheme()).Build()
	change := mdChange(workerTemplate(map[string]any{"version": "v1.37.0"}))
	now := metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	b.ReportAllocs()
	for b.Loop() {
		p, err := Predict(context.Background(), c, nil, nil, o, []*unstructured.Unstructured{change.DeepCopy()}, now)
		if err != nil {
			b.Fatal(err)
		}
		if got := len(p.Clusters[0].Machines); got != 100 {
			b.Fatalf("%d Machines predicted, want 100", got)
		}
	}
}
