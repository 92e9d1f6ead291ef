package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/test/wait"
)

// machinesPerCluster is the example's: a control-plane machine and a
// MachineDeployment of two.
const machinesPerCluster = plane.ExampleMachines

// random is the source of the points faults strike at, from -chaos-seed.
func random(t *testing.T) *rand.Rand {
	s := *seed
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("faults strike at random points: replay them with -chaos-seed=%d", s)
	return rand.New(rand.NewPCG(uint64(s), 0)) //nolint:gosec // not for security: reproducible fault points.
}

// between is a random duration in [lo, hi).
func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}

// census is what a user counts in both API servers: every CAPI object, XR
// and composed resource of the plane, in any namespace, and the workload
// cluster's Nodes (what the local backend provisions).
type census struct {
	Clusters, Machines, ClusterXRs, MachineXRs, Objects, Nodes int
	// Problems are orphaned or duplicated resources, one line each.
	Problems []string
}

func (c census) String() string {
	s := fmt.Sprintf("%d Clusters, %d Machines, %d cluster XRs, %d machine XRs, %d composed Objects, %d Nodes",
		c.Clusters, c.Machines, c.ClusterXRs, c.MachineXRs, c.Objects, c.Nodes)
	if len(c.Problems) > 0 {
		s += "; " + strings.Join(c.Problems, "; ")
	}
	return s
}

func mgmt() client.Client { return p.Management().Client }

func listAll(ctx context.Context, apiVersion, kind string) ([]unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(apiVersion)
	l.SetKind(kind + "List")
	if err := mgmt().List(ctx, l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// take counts, and finds what is orphaned or duplicated:
//   - a composed Object whose controlling XR is gone, or that has none;
//   - two Objects of one XR for the same composition resource;
//   - two machine XRs owned by one Machine;
//   - a Node in the workload cluster that no machine XR composed.
func take(ctx context.Context) (census, error) {
	var c census
	clusters := &clusterv1.ClusterList{}
	machines := &clusterv1.MachineList{}
	if err := mgmt().List(ctx, clusters); err != nil {
		return c, err
	}
	if err := mgmt().List(ctx, machines); err != nil {
		return c, err
	}
	cxrs, err := listAll(ctx, infrav1.GroupVersion.String(), "CrossplaneCluster")
	if err != nil {
		return c, err
	}
	mxrs, err := listAll(ctx, infrav1.GroupVersion.String(), "CrossplaneMachine")
	if err != nil {
		return c, err
	}
	objects, err := listAll(ctx, "kubernetes.m.crossplane.io/v1alpha1", "Object")
	if err != nil {
		return c, err
	}
	nodes := &corev1.NodeList{}
	if err := p.Workload.Client.List(ctx, nodes); err != nil {
		return c, err
	}
	c.Clusters, c.Machines, c.ClusterXRs, c.MachineXRs, c.Objects, c.Nodes = len(clusters.Items), len(machines.Items), len(cxrs), len(mxrs), len(objects), len(nodes.Items)

	xrs := map[types.UID]string{}
	machineXRNames := map[string]bool{}
	xrsOfMachine := map[types.UID][]string{}
	for _, x := range append(append([]unstructured.Unstructured{}, cxrs...), mxrs...) {
		xrs[x.GetUID()] = x.GetKind() + " " + x.GetNamespace() + "/" + x.GetName()
		if x.GetKind() == "CrossplaneMachine" {
			machineXRNames[x.GetName()] = true
			for _, o := range x.GetOwnerReferences() {
				if o.Kind == "Machine" {
					xrsOfMachine[o.UID] = append(xrsOfMachine[o.UID], x.GetName())
				}
			}
		}
	}
	for uid, names := range xrsOfMachine {
		if len(names) > 1 {
			c.Problems = append(c.Problems, fmt.Sprintf("duplicated: Machine %s owns machine XRs %v", uid, names))
		}
	}
	composed := map[string][]string{}
	for _, o := range objects {
		owner := ""
		for _, r := range o.GetOwnerReferences() {
			if r.Controller != nil && *r.Controller {
				owner = xrs[r.UID]
				if owner == "" {
					owner = "gone " + string(r.UID)
				}
			}
		}
		switch {
		case owner == "":
			c.Problems = append(c.Problems, fmt.Sprintf("orphaned: Object %s/%s has no controlling XR", o.GetNamespace(), o.GetName()))
		case strings.HasPrefix(owner, "gone "):
			c.Problems = append(c.Problems, fmt.Sprintf("orphaned: Object %s/%s's XR is %s", o.GetNamespace(), o.GetName(), owner))
		default:
			key := owner + " resource " + o.GetAnnotations()["crossplane.io/composition-resource-name"]
			composed[key] = append(composed[key], o.GetName())
		}
	}
	for key, names := range composed {
		if len(names) > 1 {
			c.Problems = append(c.Problems, fmt.Sprintf("duplicated: %s composed as Objects %v", key, names))
		}
	}
	for i := range nodes.Items {
		if n := nodes.Items[i].Name; !machineXRNames[n] {
			c.Problems = append(c.Problems, fmt.Sprintf("orphaned: Node %s in the workload cluster has no machine XR", n))
		}
	}
	sort.Strings(c.Problems)
	return c, nil
}

// converged says whether every cluster of the fleet is provisioned, with
// exactly its XRs, composed resources and Nodes, and nothing orphaned or
// duplicated; extra are machine XRs outside the fleet (composing nothing).
func converged(ctx context.Context, fleet []string, extra int) error {
	for _, name := range fleet {
		st, err := p.ExampleStatusOf(ctx, name, machinesPerCluster)
		if err != nil {
			return err
		}
		if !st.Provisioned {
			return fmt.Errorf("cluster %s not provisioned:\n%s", name, strings.Join(st.Lines, "\n"))
		}
	}
	c, err := take(ctx)
	if err != nil {
		return err
	}
	n, m := len(fleet), len(fleet)*machinesPerCluster
	want := census{Clusters: n, Machines: m, ClusterXRs: n, MachineXRs: m + extra, Objects: n + m, Nodes: m}
	if c.String() != want.String() {
		return fmt.Errorf("counted %s; want %s", c, want)
	}
	return nil
}

// gone says whether nothing of any cluster is left in either API server.
func gone(ctx context.Context) error {
	c, err := take(ctx)
	if err != nil {
		return err
	}
	if c.String() != (census{}).String() {
		return fmt.Errorf("left: %s", c)
	}
	return nil
}

// applyFleet applies the example once per name.
func applyFleet(ctx context.Context, fleet []string) error {
	for _, name := range fleet {
		if err := p.ApplyExampleAs(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// deleteAll deletes the fleet's Clusters and waits until nothing of them is
// left, and nothing stuck, in either API server.
func deleteAll(ctx context.Context, t *testing.T, fleet []string) {
	t.Helper()
	deleteFleet(context.WithoutCancel(ctx), t, fleet)
	eventually(t, "the fleet is deleted, nothing stuck or left in either API server", 3*time.Minute, func() error {
		return gone(ctx)
	})
}

// deleteFleet deletes the fleet's Clusters, as a user deletes a cluster.
func deleteFleet(ctx context.Context, t *testing.T, fleet []string) {
	t.Helper()
	for _, name := range fleet {
		c := &clusterv1.Cluster{}
		c.Namespace, c.Name = plane.ExampleNamespaceOf(name), name
		if err := mgmt().Delete(ctx, c); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
}

// history records the states a condition passes through, per object: what a
// user watching `kubectl get -w` would see.
type history map[string][]string

// see records c's state for key when it differs from the last one.
func (h history) see(key string, c *metav1.Condition) {
	now := "absent"
	if c != nil {
		now = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
	}
	if s := h[key]; len(s) == 0 || s[len(s)-1] != now {
		h[key] = append(s, now)
	}
}

// seeMachines records every Machine's InfrastructureReady in namespace ns.
func (h history) seeMachines(ctx context.Context, ns string) error {
	ms := &clusterv1.MachineList{}
	if err := mgmt().List(ctx, ms, client.InNamespace(ns)); err != nil {
		return err
	}
	for i := range ms.Items {
		m := &ms.Items[i]
		h.see("Machine "+m.Name+" InfrastructureReady", meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition))
	}
	return nil
}

// flapped fails t for every condition that flapped while what happened:
// that came back to a state it had left or, when trueHolds, went back from
// True.
func (h history) flapped(t *testing.T, while string, trueHolds bool) {
	t.Helper()
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		s := h[key]
		t.Logf("%s %s:\n  %s", key, while, strings.Join(s, "\n  "))
		seen := map[string]bool{}
		wasTrue := false
		for _, state := range s {
			switch {
			case trueHolds && wasTrue && !strings.HasPrefix(state, "True "):
				t.Errorf("%s went back from True %s: %s", key, while, state)
			case seen[state]:
				t.Errorf("%s came back to a state it had left %s: %s", key, while, state)
			}
			seen[state] = true
			wasTrue = wasTrue || strings.HasPrefix(state, "True ")
		}
	}
	if len(h) == 0 {
		t.Errorf("no condition was seen %s", while)
	}
}

// eventually waits as every fault test does, naming the plane's logs when
// what it waits for does not come.
var eventually = wait.Options{Logs: func() string { return p.Dir() }}.Eventually
