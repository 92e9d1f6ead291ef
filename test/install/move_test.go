package install

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/dev/localkube"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	ctlsetup "github.com/capxp/cluster-api-provider-crossplane/test/clusterctl"
)

// TestClusterctlMove pivots a cluster between two management planes with
// `clusterctl move`, and back, as platform teams move clusters from a
// bootstrap cluster to a permanent one. Both planes are installed with
// clusterctl from the release's provider files, each with Crossplane,
// provider-kubernetes and CAPXP, and both provision into the same workload
// API server, which stands in for the cloud. What a user counts there must
// not change: 0 objects deleted and 0 created by a move. On the target the
// XRs adopt the moved composed resources and the Cluster and Machines are
// provisioned again; the source keeps nothing of the cluster.
func TestClusterctlMove(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "capxp-move-")
	if err != nil {
		t.Fatal(err)
	}
	clusterctl, bin := ctlsetup.Install(ctx, t, dir)
	// The workload API server logs every write: the cloud's own record of
	// what was created and deleted.
	bootstrap := startPlane(ctx, t, filepath.Join(dir, "bootstrap"), plane.Options{Clusterctl: true, AuditWorkload: true, AWSCRDs: true})
	// provider-kubernetes v1.2.1 listens on fixed ports, so the two planes'
	// cannot run at once on one machine. The source's runs while the move
	// happens (it is the one that could delete what moves); the target's
	// starts once the move has ended, as after an upgrade.
	bootstrap.StopProviderKubernetes()
	permanent := startPlane(ctx, t, filepath.Join(dir, "permanent"), plane.Options{Clusterctl: true, Workload: bootstrap.Workload, AWSCRDs: true})
	permanent.StopProviderKubernetes()
	if err := bootstrap.StartProviderKubernetes(ctx); err != nil {
		t.Fatal(err)
	}
	ctlsetup.Init(ctx, t, bootstrap, clusterctl, bin)
	ctlsetup.Init(ctx, t, permanent, clusterctl, bin)

	// A local cluster, and an AWS one whose provider the test plays on both
	// planes, as a provider installed on each would run (there is no AWS
	// here): it keeps the account's record of what was created and deleted.
	local := movedCluster{ns: "team-a", name: "alpha", machines: 3, kinds: []schema.GroupVersionKind{objectGVK}}
	aws := movedCluster{ns: "team-b", name: "beta", machines: 1, kinds: newAWSCloud(t).kinds}
	cloud := newAWSCloud(t)
	var providers sync.WaitGroup
	t.Cleanup(func() { cancel(); providers.Wait() })
	for _, p := range []*plane.Plane{bootstrap, permanent} {
		awsCredentials(ctx, t, p, aws.ns, "team-b-aws")
		providers.Go(func() { cloud.run(ctx, t, p, aws.ns) })
	}
	objs := provisionLocal(ctx, t, bootstrap, clusterctl, local.ns, local.name)
	// Crossplane's credentials are the platform's, set up on each
	// management cluster like the providers: the local flavor's
	// ProviderConfig goes to the permanent cluster first. (It reads the
	// cluster's kubeconfig Secret, which moves with the cluster.)
	create(ctx, t, permanent, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: local.ns}})
	for _, o := range objs {
		if o.GetKind() == "ProviderConfig" {
			create(ctx, t, permanent, o.DeepCopy())
		}
	}
	awsNode := provisionAWS(ctx, t, bootstrap, aws.ns, aws.name, "team-b-aws")
	for _, cl := range []movedCluster{local, aws} {
		eventually(t, cl.name+" is ready to move (control plane initialized, every Machine has a node)", 3*time.Minute, func() error {
			return readyToMove(ctx, bootstrap, cl)
		})
	}
	inWorkload := inventory(ctx, t, bootstrap)
	t.Logf("in the workload cluster: %s", inWorkload)
	awsCreated, _ := cloud.changes()
	t.Logf("in AWS (played): %d external resources created", len(awsCreated))

	for _, hop := range []struct {
		what     string
		from, to *plane.Plane
	}{
		{"bootstrap → permanent", bootstrap, permanent},
		{"permanent → bootstrap", permanent, bootstrap},
	} {
		composed := map[string][]string{}
		external := externalNames(ctx, t, hop.from, aws.ns, aws.kinds)
		for _, cl := range []movedCluster{local, aws} {
			composed[cl.ns] = composedNames(ctx, t, hop.from, cl)
			// clusterctl notes which objects block the move when it
			// discovers them, before it pauses anything: every XR must,
			// until the bridge has guarded what it composed.
			if unblocked := withoutBlockMove(ctx, t, hop.from, cl.ns); len(unblocked) > 0 {
				t.Fatalf("%s: XRs without %s before the move: %v", hop.what, infrav1.BlockMoveAnnotation, unblocked)
			}
		}
		created, deleted := cloud.changes()
		moved := time.Now()
		for _, cl := range []movedCluster{local, aws} {
			clusterctl(hop.from, "move", "-n", cl.ns, "--to-kubeconfig", hop.to.Kubeconfig())
		}
		hop.from.StopProviderKubernetes()
		if err := hop.to.StartProviderKubernetes(ctx); err != nil {
			t.Fatal(err)
		}
		for _, cl := range []movedCluster{local, aws} {
			eventually(t, hop.what+": "+cl.name+" is provisioned again on the target", 3*time.Minute, func() error {
				return readyToMove(ctx, hop.to, cl)
			})
			eventually(t, hop.what+": the target's XRs adopted the moved composed resources of "+cl.name, time.Minute, func() error {
				return adopted(ctx, hop.to, cl, composed[cl.ns])
			})
			if left := leftIn(ctx, t, hop.from, cl); len(left) > 0 {
				t.Errorf("%s: the source keeps %v", hop.what, left)
			}
		}
		// Whatever the source's providers and Crossplane were going to do,
		// they have had the time to.
		time.Sleep(15 * time.Second)
		if now := inventory(ctx, t, bootstrap); now != inWorkload {
			t.Errorf("%s: the move changed the workload cluster:\nbefore %s\nafter  %s", hop.what, inWorkload, now)
		}
		if changed := createdOrDeleted(t, bootstrap.WorkloadAuditLog(), moved); len(changed) > 0 {
			t.Errorf("%s: the workload API server logged, since the move began: %v", hop.what, changed)
		}
		if err := sameExternalNames(external, externalNames(ctx, t, hop.to, aws.ns, aws.kinds)); err != nil {
			t.Errorf("%s: the AWS managed resources on the target differ: %v", hop.what, err)
		}
		if c, d := cloud.changes(); len(c) != len(created) || len(d) != len(deleted) {
			t.Errorf("%s: the move created %v and deleted %v in AWS", hop.what, c[len(created):], d[len(deleted):])
		}
		if t.Failed() {
			t.FailNow()
		}
		t.Logf("%s: 0 objects deleted and 0 created in the workload cluster; the %d AWS managed resources arrived with their external names, 0 created or deleted in AWS",
			hop.what, len(external))
	}

	// Back home, the clusters delete as any others: the guards are gone.
	c := bootstrap.Management().Client
	for _, cl := range []movedCluster{local, aws} {
		if err := c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: cl.name}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the moved clusters delete, and their infrastructure with them", 3*time.Minute, func() error {
		for _, cl := range []movedCluster{local, aws} {
			if left := leftIn(ctx, t, bootstrap, cl); len(left) > 0 {
				return fmt.Errorf("left: %v", left)
			}
		}
		// The instance is gone; the cloud's node controller would remove
		// its Node.
		if err := client.IgnoreNotFound(bootstrap.Workload.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: awsNode}})); err != nil {
			return err
		}
		// The API server's own EndpointSlice was only observed, and stays.
		if now := inventory(ctx, t, bootstrap); strings.Contains(now, "Node ") {
			return fmt.Errorf("left in the workload cluster: %s", now)
		}
		return nil
	})
	created, deleted := cloud.changes()
	if len(created) != len(deleted) {
		t.Errorf("AWS: %d external resources created, %d deleted: %v", len(created), len(deleted), created)
	}
}

// movedCluster is a cluster the test moves: its namespace and name, how
// many Machines it has, and the kinds its XRs compose.
type movedCluster struct {
	ns, name string
	machines int
	kinds    []schema.GroupVersionKind
}

func create(ctx context.Context, t *testing.T, p *plane.Plane, o client.Object) {
	t.Helper()
	createAs(ctx, t, p.Management().Client, o)
}

// readyToMove is what clusterctl move checks before it moves a cluster: its
// infrastructure provisioned, its control plane initialized, a node for
// every Machine.
func readyToMove(ctx context.Context, p *plane.Plane, m movedCluster) error {
	c := p.Management().Client
	cl := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: m.ns, Name: m.name}, cl); err != nil {
		return err
	}
	if !ptrTrue(cl.Status.Initialization.InfrastructureProvisioned) {
		return fmt.Errorf("cluster infrastructure not provisioned")
	}
	if !apimeta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1.ClusterControlPlaneInitializedCondition) {
		return fmt.Errorf("control plane not initialized")
	}
	ms := &clusterv1.MachineList{}
	if err := c.List(ctx, ms, client.InNamespace(m.ns)); err != nil {
		return err
	}
	if len(ms.Items) != m.machines {
		return fmt.Errorf("%d Machines, want %d", len(ms.Items), m.machines)
	}
	for i := range ms.Items {
		m := &ms.Items[i]
		if !ptrTrue(m.Status.Initialization.InfrastructureProvisioned) || !m.Status.NodeRef.IsDefined() {
			return fmt.Errorf("Machine %s not provisioned, or without a node", m.Name)
		}
	}
	return nil
}

// inventory is what a user counts in the cloud: every object of the kinds
// the local backend composes (or observes) in the workload cluster, Nodes
// and EndpointSlices, by kind, name and UID. An object deleted and created
// again has a new UID.
func inventory(ctx context.Context, t *testing.T, p *plane.Plane) string {
	t.Helper()
	var items []string
	nodes := &corev1.NodeList{}
	slices := &discoveryv1.EndpointSliceList{}
	if err := p.Workload.Client.List(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	if err := p.Workload.Client.List(ctx, slices); err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		items = append(items, fmt.Sprintf("Node %s %s", nodes.Items[i].Name, nodes.Items[i].UID))
	}
	for i := range slices.Items {
		items = append(items, fmt.Sprintf("EndpointSlice %s/%s %s", slices.Items[i].Namespace, slices.Items[i].Name, slices.Items[i].UID))
	}
	sort.Strings(items)
	return strings.Join(items, ", ")
}

// objectGVK is provider-kubernetes' managed resource, what the local
// backend composes.
var objectGVK = schema.GroupVersionKind{Group: "kubernetes.m.crossplane.io", Version: "v1alpha1", Kind: "Object"}

// composedNames are the composed resources of a cluster's namespace, by
// kind and name.
func composedNames(ctx context.Context, t *testing.T, p *plane.Plane, m movedCluster) []string {
	t.Helper()
	objs, err := composedIn(ctx, p, m.ns, m.kinds)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(objs))
	for i := range objs {
		names = append(names, key(&objs[i]))
	}
	if len(names) == 0 {
		t.Fatal("nothing composed to move")
	}
	return names
}

// adopted says whether the cluster's namespace holds exactly the composed
// resources named, each controlled by an XR of this cluster and none
// guarded any more, every XR unpaused and Ready, and clusterctl's
// block-move back on them.
func adopted(ctx context.Context, p *plane.Plane, m movedCluster, want []string) error {
	c := p.Management().Client
	xrs := map[string]unstructured.Unstructured{}
	for _, kind := range []string{"CrossplaneCluster", "CrossplaneMachine"} {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(infrav1.GroupVersion.String())
		l.SetKind(kind + "List")
		if err := c.List(ctx, l, client.InNamespace(m.ns)); err != nil {
			return err
		}
		for _, xr := range l.Items {
			xrs[string(xr.GetUID())] = xr
			if _, paused := xr.GetAnnotations()[infrav1.CrossplanePausedAnnotation]; paused {
				return fmt.Errorf("%s %s still paused", kind, xr.GetName())
			}
			if _, ok := xr.GetAnnotations()[infrav1.BlockMoveAnnotation]; !ok {
				return fmt.Errorf("%s %s lacks %s", kind, xr.GetName(), infrav1.BlockMoveAnnotation)
			}
			if !ready(&xr) {
				return fmt.Errorf("%s %s not Ready", kind, xr.GetName())
			}
		}
	}
	objs, err := composedIn(ctx, p, m.ns, m.kinds)
	if err != nil {
		return err
	}
	got := make([]string, 0, len(objs))
	for i := range objs {
		o := &objs[i]
		got = append(got, key(o))
		owner := metav1.GetControllerOf(o)
		if owner == nil {
			return fmt.Errorf("%s has no controller", key(o))
		}
		if _, ok := xrs[string(owner.UID)]; !ok {
			return fmt.Errorf("%s is controlled by %s %s, not by an XR here", key(o), owner.Kind, owner.UID)
		}
		if slices.Contains(o.GetFinalizers(), infrav1.MoveGuardFinalizer) {
			return fmt.Errorf("%s still guarded", key(o))
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		return fmt.Errorf("composed %v, want the moved %v", got, want)
	}
	return nil
}

// leftIn lists what the cluster's namespace still holds of CAPI, CAPXP and
// what was composed.
func leftIn(ctx context.Context, t *testing.T, p *plane.Plane, m movedCluster) []string {
	t.Helper()
	var left []string
	for _, gvk := range []struct{ apiVersion, kind string }{
		{clusterv1.GroupVersion.String(), "Cluster"},
		{clusterv1.GroupVersion.String(), "MachineDeployment"},
		{clusterv1.GroupVersion.String(), "MachineSet"},
		{clusterv1.GroupVersion.String(), "Machine"},
		{infrav1.GroupVersion.String(), "CrossplaneCluster"},
		{infrav1.GroupVersion.String(), "CrossplaneMachine"},
		{infrav1.GroupVersion.String(), "CrossplaneMachineTemplate"},
	} {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(gvk.apiVersion)
		l.SetKind(gvk.kind + "List")
		if err := p.Management().Client.List(ctx, l, client.InNamespace(m.ns)); err != nil {
			t.Fatal(err)
		}
		for _, o := range l.Items {
			left = append(left, gvk.kind+" "+o.GetName())
		}
	}
	objs, err := composedIn(ctx, p, m.ns, m.kinds)
	if err != nil {
		t.Fatal(err)
	}
	for i := range objs {
		left = append(left, key(&objs[i]))
	}
	return left
}

// withoutBlockMove names the namespace's XRs that lack clusterctl's
// block-move annotation.
func withoutBlockMove(ctx context.Context, t *testing.T, p *plane.Plane, ns string) []string {
	t.Helper()
	var without []string
	for _, kind := range []string{"CrossplaneCluster", "CrossplaneMachine"} {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(infrav1.GroupVersion.String())
		l.SetKind(kind + "List")
		if err := p.Management().Client.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, xr := range l.Items {
			if _, ok := xr.GetAnnotations()[infrav1.BlockMoveAnnotation]; !ok {
				without = append(without, kind+" "+xr.GetName())
			}
		}
	}
	return without
}

// createdOrDeleted reads a Kubernetes audit log and names every object a
// create or a delete succeeded on since a time, whoever made it (events and
// access reviews, which store nothing of the cluster's, aside).
func createdOrDeleted(t *testing.T, path string, since time.Time) []string {
	t.Helper()
	f, err := localkube.OpenAuditLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var changed []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e struct {
			Verb           string    `json:"verb"`
			Stage          string    `json:"stage"`
			Timestamp      time.Time `json:"stageTimestamp"`
			UserAgent      string    `json:"userAgent"`
			ObjectRef      struct{ Resource, Namespace, Name string }
			ResponseStatus struct{ Code int }
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e.Stage != "ResponseComplete" || e.Timestamp.Before(since) || e.ResponseStatus.Code >= 300 ||
			e.Verb != "create" && e.Verb != "delete" && e.Verb != "deletecollection" ||
			e.ObjectRef.Resource == "events" || strings.HasSuffix(e.ObjectRef.Resource, "reviews") {
			continue
		}
		changed = append(changed, fmt.Sprintf("%s %s %s/%s by %s", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name, e.UserAgent))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return changed
}
