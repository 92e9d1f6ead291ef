package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	ctlsetup "github.com/capxp/cluster-api-provider-crossplane/test/clusterctl"
)

// TestUpgrade upgrades CAPXP from the previous release (built from its
// commit in this repository's history) to this checkout's with clusters
// running, on both install paths, with docs/upgrade.md's commands as
// written, and fails unless nothing was replaced, recreated or lost.
func TestUpgrade(t *testing.T) {
	t.Run("clusterctl", upgradeWithClusterctl)
	t.Run("packages", upgradeWithPackages)
}

func upgradeWithClusterctl(t *testing.T) {
	ctx, dir := begin(t, "upgrade-clusterctl", 20*time.Minute)
	oldRel, oldBin := ctlsetup.PreviousRelease(ctx, t)
	crossplane, _ := ctlsetup.CrossplaneCLI(ctx, t, dir)
	ctl := filepath.Join(dir, "ctl")
	clusterctl := ctlsetup.InstallRelease(ctx, t, ctl, oldRel)
	p := startPlane(ctx, t, dir, plane.Options{
		Clusterctl: true, Release: oldRel, AuditManagement: true,
		InstallConfiguration: func(_ context.Context, in plane.PackageInstall) (string, error) {
			_, err := crossplane(in.Kubeconfig, "xpkg", "install", "configuration", in.Ref, "capxp-compositions")
			return in.Ref, err
		},
	})
	c := p.Management().Client
	ctlsetup.Init(ctx, t, p, clusterctl, oldBin)
	deploymentImage(ctx, t, c, ctlsetup.PreviousVersion)

	provisionLocal(ctx, t, p, clusterctl, "team-a", "alpha")
	provisionManaged(ctx, t, p, clusterctl, "team-b", "bravo")
	before := snapshot(ctx, t, c)
	watch := watchAvailable(ctx, t, c)

	newRel := newRelease(ctx, t, dir, p)
	newVersion := ctlsetup.AddRelease(t, ctl, newRel)
	if err := os.Symlink(newRel, filepath.Join(ctl, "out-"+newVersion)); err != nil {
		t.Fatal(err)
	}
	env := append(append(ctlsetup.Env(ctl), registryEnv(p.Registry())...), "NEW="+newVersion)
	runDoc(ctx, t, p, "docs/upgrade.md", "push", ctl, env...)
	// The kubelet's part of `kubectl rollout status`: once clusterctl has
	// replaced the Deployment's template, the old pod goes and the pushed
	// image's binary runs.
	rolled := runWhenRolled(ctx, p, newVersion, "")
	runDoc(ctx, t, p, "docs/upgrade.md", "clusterctl", ctl, env...)
	if err := <-rolled; err != nil {
		t.Fatal(err)
	}
	if err := p.WaitForPackages(ctx, docRegistry(p.Registry())+"/"+release.CompositionsPackageName+":"+newVersion, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	oneBridge(t, p)
	settled(ctx, t, p, before, watch)
}

func upgradeWithPackages(t *testing.T) {
	ctx, dir := begin(t, "upgrade-packages", 20*time.Minute)
	oldRel, _ := ctlsetup.PreviousRelease(ctx, t)
	crossplane, _ := ctlsetup.CrossplaneCLI(ctx, t, dir)
	p := startPlane(ctx, t, dir, plane.Options{
		Release: oldRel, AuditManagement: true,
		InstallConfiguration: func(_ context.Context, in plane.PackageInstall) (string, error) {
			_, err := crossplane(in.Kubeconfig, "xpkg", "install", "configuration", in.Ref, "capxp")
			return in.Ref, err
		},
	})
	c := p.Management().Client
	// The local cluster, the byo one (hosts that exist, nothing composed)
	// and one of the ClusterClass crossplane-local, each Available where
	// CAPI can say so.
	for _, name := range []string{"local", "byo", "topology"} {
		e, err := plane.ExampleNamed(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.ApplyNamedExample(ctx, e); err != nil {
			t.Fatal(err)
		}
		wait := p.WaitForExampleOf
		if e.Available {
			wait = p.WaitForExampleAvailable
		}
		if err := wait(ctx, e.Cluster, e.Machines, 4*time.Minute, func(plane.Status) {}); err != nil {
			t.Fatalf("example %s: %v", name, err)
		}
	}
	before := snapshot(ctx, t, c)
	watch := watchAvailable(ctx, t, c)

	newRel := newRelease(ctx, t, dir, p)
	newVersion, err := release.VersionOf(newRel)
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(newRel, filepath.Join(work, "out-"+newVersion)); err != nil {
		t.Fatal(err)
	}
	env := append(registryEnv(p.Registry()), "NEW="+newVersion)
	runDoc(ctx, t, p, "docs/upgrade.md", "push", work, env...)
	runDoc(ctx, t, p, "docs/upgrade.md", "packages", work, env...)
	if err := p.WaitForPackages(ctx, docRegistry(p.Registry())+"/"+release.ConfigurationPackageName+":"+newVersion, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	installed, err := p.Packages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range installed {
		src := strings.Fields(l)[0]
		for _, own := range []string{release.ConfigurationPackageName, release.CompositionsPackageName, release.ProviderPackageName, release.FunctionPackageName} {
			if strings.Contains(src, "/"+own+":") && !strings.HasSuffix(src, ":"+newVersion) {
				t.Errorf("CAPXP's package is not at %s after the upgrade: %s", newVersion, l)
			}
		}
	}
	eventually(t, "the bridge runs the new release's package", 2*time.Minute, func() error {
		if pkg := p.BridgePackage(); !strings.HasSuffix(pkg, "/"+release.ProviderPackageName+":"+newVersion) {
			return fmt.Errorf("the bridge runs %q", pkg)
		}
		return nil
	})
	oneBridge(t, p)
	settled(ctx, t, p, before, watch)
}

// newRelease builds this checkout's release as docs/upgrade.md does, for
// the registry the upgrade pushes it to: `make release
// PACKAGE_REGISTRY=$REGISTRY IMAGE_REPOSITORY=$REGISTRY/capxp-manager`,
// $REGISTRY the plane's.
func newRelease(ctx context.Context, t *testing.T, dir string, p *plane.Plane) string {
	t.Helper()
	reg := docRegistry(p.Registry())
	_, rel, _ := ctlsetup.PackagedRelease(ctx, t, filepath.Join(dir, "new"), release.Options{PackageRegistry: reg, ImageRepository: reg + "/capxp-manager"})
	return rel
}

// deploymentImage fails the test unless the manager's Deployment names the
// manager image of version.
func deploymentImage(ctx context.Context, t *testing.T, c client.Client, version string) {
	t.Helper()
	if img, err := managerImage(ctx, c); err != nil || !strings.HasSuffix(img, ":"+version) {
		t.Fatalf("the manager's Deployment runs %q (%v), want the image of %s", img, err, version)
	}
}

func managerImage(ctx context.Context, c client.Client) (string, error) {
	d := &unstructured.Unstructured{}
	d.SetGroupVersionKind(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
	if err := c.Get(ctx, client.ObjectKey{Namespace: "capxp-system", Name: "capxp-controller-manager"}, d); err != nil {
		return "", err
	}
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		return "", fmt.Errorf("no container")
	}
	img, _, _ := unstructured.NestedString(cs[0].(map[string]any), "image")
	return img, nil
}

// runWhenRolled does in the background what the kubelet does when
// clusterctl installs or upgrades the manager's Deployment: once its
// container names the image of version, the old pod (if any) stops and
// bin, that image's binary, runs with the new template; the Deployment's
// status then says so, for `kubectl rollout status`. The channel reports
// the outcome.
func runWhenRolled(ctx context.Context, p *plane.Plane, version, bin string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- rollDeployment(ctx, p, version, bin) }()
	return done
}

func rollDeployment(ctx context.Context, p *plane.Plane, version, bin string) error {
	c := p.Management().Client
	for {
		img, err := managerImage(ctx, c)
		if err == nil && strings.HasSuffix(img, ":"+version) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the manager's Deployment never named the image of %s (last %q, %v)", version, img, err)
		case <-time.After(time.Second):
		}
	}
	p.StopDeployment()
	return p.RunDeployment(ctx, "capxp-system", "capxp-controller-manager", bin)
}

// upgradeKinds are what an upgrade must leave in place: CAPI's objects
// (a rollout would replace MachineSets and Machines), CAPXP's XRs, the
// templates, grants and records.
var upgradeKinds = []schema.GroupKind{
	{Group: clusterv1.GroupVersion.Group, Kind: "Cluster"},
	{Group: clusterv1.GroupVersion.Group, Kind: "ClusterClass"},
	{Group: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane"},
	{Group: clusterv1.GroupVersion.Group, Kind: "MachineDeployment"},
	{Group: clusterv1.GroupVersion.Group, Kind: "MachineSet"},
	{Group: clusterv1.GroupVersion.Group, Kind: "Machine"},
	{Group: clusterv1.GroupVersion.Group, Kind: "MachinePool"},
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "CrossplaneCluster"},
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "CrossplaneMachine"},
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "CrossplaneMachinePool"},
	{Group: "controlplane.cluster.x-k8s.io", Kind: "CrossplaneControlPlane"},
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "CrossplaneMachineTemplate"},
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "ClusterProviderConfigGrant"},
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "NamespaceCredentials"},
}

// xrKinds are the kinds of upgradeKinds whose objects compose resources.
var xrKinds = []string{"CrossplaneCluster", "CrossplaneMachine", "CrossplaneMachinePool", "CrossplaneControlPlane"}

// snapshot maps every object of upgradeKinds and every resource an XR
// composes ("Kind namespace/name") to its UID: an object replaced or
// recreated has a new one.
func snapshot(ctx context.Context, t *testing.T, c client.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, gk := range upgradeKinds {
		m, err := c.RESTMapper().RESTMapping(gk)
		if err != nil {
			continue // a kind this install does not serve
		}
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(m.GroupVersionKind.GroupVersion().WithKind(gk.Kind + "List"))
		if err := c.List(ctx, l); err != nil {
			t.Fatalf("cannot list %s: %v", gk, err)
		}
		for i := range l.Items {
			o := &l.Items[i]
			out[gk.Kind+" "+o.GetNamespace()+"/"+o.GetName()] = string(o.GetUID())
			if !slices.Contains(xrKinds, gk.Kind) {
				continue
			}
			refs, _, _ := unstructured.NestedSlice(o.Object, "spec", "crossplane", "resourceRefs")
			for _, r := range refs {
				ref, _ := r.(map[string]any)
				composed := &unstructured.Unstructured{}
				composed.SetAPIVersion(fmt.Sprint(ref["apiVersion"]))
				composed.SetKind(fmt.Sprint(ref["kind"]))
				ns, _ := ref["namespace"].(string)
				if ns == "" {
					ns = o.GetNamespace()
				}
				k := client.ObjectKey{Namespace: ns, Name: fmt.Sprint(ref["name"])}
				if err := c.Get(ctx, k, composed); err != nil {
					// A cluster-scoped composed resource.
					if err := c.Get(ctx, client.ObjectKey{Name: k.Name}, composed); err != nil {
						t.Fatalf("cannot get %s %s composed by %s %s: %v", ref["kind"], k, gk.Kind, o.GetName(), err)
					}
				}
				out["composed "+composed.GetKind()+" "+composed.GetNamespace()+"/"+composed.GetName()] = string(composed.GetUID())
			}
		}
	}
	return out
}

// availability records every Cluster that was Available when the watch
// began and was seen not Available after.
type availability struct {
	mu     sync.Mutex
	was    map[string]bool
	lapsed map[string]string
	stop   context.CancelFunc
	done   chan struct{}
}

// watchAvailable polls the Clusters every second until settled stops it.
func watchAvailable(ctx context.Context, t *testing.T, c client.Client) *availability {
	t.Helper()
	a := &availability{was: map[string]bool{}, lapsed: map[string]string{}, done: make(chan struct{})}
	available := func() map[string]string {
		l := &clusterv1.ClusterList{}
		if err := c.List(ctx, l); err != nil {
			return nil
		}
		out := map[string]string{}
		for i := range l.Items {
			cl := &l.Items[i]
			out[cl.Namespace+"/"+cl.Name] = "missing Available"
			if cond := conditions.Get(cl, clusterv1.AvailableCondition); cond != nil {
				out[cl.Namespace+"/"+cl.Name] = string(cond.Status) + " " + cond.Reason + " " + cond.Message
			}
		}
		return out
	}
	for k, s := range available() {
		a.was[k] = strings.HasPrefix(s, string(metav1.ConditionTrue))
	}
	wctx, cancel := context.WithCancel(ctx)
	a.stop = cancel
	go func() {
		defer close(a.done)
		for {
			select {
			case <-wctx.Done():
				return
			case <-time.After(time.Second):
			}
			now := available()
			if now == nil {
				continue
			}
			a.mu.Lock()
			for k, was := range a.was {
				if s := now[k]; was && !strings.HasPrefix(s, string(metav1.ConditionTrue)) {
					if _, seen := a.lapsed[k]; !seen {
						a.lapsed[k] = fmt.Sprintf("%s: %q", time.Now().Format(time.TimeOnly), s)
					}
				}
			}
			a.mu.Unlock()
		}
	}()
	return a
}

// settled waits until every XR is Synced and Ready under the new bridge,
// then fails the test for every object replaced, recreated or lost since
// before, and for every Cluster that stopped being Available meanwhile.
func settled(ctx context.Context, t *testing.T, p *plane.Plane, before map[string]string, watch *availability) {
	t.Helper()
	c := p.Management().Client
	eventually(t, "every XR is Synced and Ready after the upgrade", 3*time.Minute, func() error {
		for _, kind := range xrKinds {
			gk := schema.GroupKind{Group: "infrastructure.cluster.x-k8s.io", Kind: kind}
			if kind == "CrossplaneControlPlane" {
				gk.Group = "controlplane.cluster.x-k8s.io"
			}
			m, err := c.RESTMapper().RESTMapping(gk)
			if err != nil {
				continue
			}
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(m.GroupVersionKind.GroupVersion().WithKind(kind + "List"))
			if err := c.List(ctx, l); err != nil {
				return err
			}
			for i := range l.Items {
				for _, cond := range []string{"Synced", "Ready"} {
					if s, _ := condition(&l.Items[i], cond)["status"].(string); s != "True" {
						return fmt.Errorf("%s %s/%s: %s %v", kind, l.Items[i].GetNamespace(), l.Items[i].GetName(), cond, condition(&l.Items[i], cond))
					}
				}
			}
		}
		return nil
	})
	watch.stop()
	<-watch.done
	after := snapshot(ctx, t, c)
	var changed []string
	for k, uid := range before {
		switch now, ok := after[k]; {
		case !ok:
			changed = append(changed, k+": gone")
		case now != uid:
			changed = append(changed, k+": replaced (UID "+uid+" → "+now+")")
		}
	}
	sort.Strings(changed)
	t.Logf("upgrade: %d objects before, %d after, %d replaced or gone", len(before), len(after), len(changed))
	for _, ch := range changed {
		t.Errorf("the upgrade replaced or lost %s", ch)
	}
	machines := 0
	for k := range before {
		if strings.HasPrefix(k, "Machine ") {
			machines++
		}
	}
	if machines == 0 {
		t.Error("no Machine ran before the upgrade: nothing was proven")
	}
	watch.mu.Lock()
	defer watch.mu.Unlock()
	for k, s := range watch.lapsed {
		t.Errorf("Cluster %s was Available before the upgrade and was not at %s", k, s)
	}
}
