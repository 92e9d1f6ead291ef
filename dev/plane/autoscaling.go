package plane

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/compositions"
)

const (
	// poolLabel marks the Nodes of one auto scaling group with its name
	// (<XR namespace>.<XR name>).
	poolLabel = "capxp.dev/local-machine-pool"
	// poolFinalizer holds a group's ask until its Nodes are gone, as a
	// cloud's auto scaling group is deleted only once its instances are
	// terminated.
	poolFinalizer = "capxp.dev/local-machine-pool"
	zoneLabel     = "topology.kubernetes.io/zone"
)

// autoScalingGroups stands in for a cloud's auto scaling service, the
// local backend's machine pools: each ConfigMap the local
// CrossplaneMachinePool Composition creates in the workload cluster's
// compositions.LocalMachinePoolNamespace asks for a number of instances,
// spread over failure domains; the plane registers that many Nodes
// (kwok runs them), each with a providerID, balanced over the failure
// domains and reporting the asked version, removes the newest when the
// ask shrinks, and publishes the instances' provider IDs, oldest first, in
// the ConfigMap the Composition observes. Like the kubelets' stand-in, it
// does not replace an instance that is gone or refresh instances on a new
// version or new bootstrap data: new instances get them.
type autoScalingGroups struct {
	// asks reads the groups' ConfigMaps through a cache of the workload
	// cluster; workload writes and reads Nodes directly.
	asks     client.Client
	workload client.Client
}

// standInForAutoScaling runs autoScalingGroups in CAPI's manager, watching
// the workload cluster's asks.
func (p *Plane) standInForAutoScaling(mgr ctrl.Manager) error {
	wl, err := cluster.New(p.Workload.Config, func(o *cluster.Options) {
		o.Scheme = mgr.GetScheme()
		o.Cache.ByObject = map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{compositions.LocalMachinePoolNamespace: {}}},
		}
	})
	if err != nil {
		return errors.Wrap(err, "cannot watch the workload cluster for machine pools")
	}
	if err := mgr.Add(wl); err != nil {
		return errors.Wrap(err, "cannot watch the workload cluster for machine pools")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: compositions.LocalMachinePoolNamespace}}
	if err := p.Workload.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return errors.Wrapf(err, "cannot create namespace %s", ns.Name)
	}
	asks := predicate.NewTypedPredicateFuncs(func(cm *corev1.ConfigMap) bool {
		return !strings.HasSuffix(cm.Name, compositions.LocalMachinePoolInstancesSuffix)
	})
	err = builder.ControllerManagedBy(mgr).
		Named("plane-auto-scaling-groups").
		WatchesRawSource(source.Kind(wl.GetCache(), &corev1.ConfigMap{}, &handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{}, asks)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2, SkipNameValidation: ptr.To(true)}).
		Complete(&autoScalingGroups{asks: wl.GetClient(), workload: p.Workload.Client})
	return errors.Wrap(err, "cannot run the plane's stand-in for auto scaling groups")
}

// ask is what a group's ConfigMap asks for.
type ask struct {
	namespace, name string
	replicas        int
	failureDomains  []string
	version         string
}

func readAsk(cm *corev1.ConfigMap) (ask, error) {
	a := ask{namespace: cm.Data[compositions.LocalMachinePoolKeyNamespace], name: cm.Data[compositions.LocalMachinePoolKeyName],
		version: cm.Data[compositions.LocalMachinePoolKeyVersion]}
	if a.namespace == "" || a.name == "" {
		return a, errors.Errorf("ConfigMap %s names no pool (%s and %s)", cm.Name, compositions.LocalMachinePoolKeyNamespace, compositions.LocalMachinePoolKeyName)
	}
	n, err := strconv.Atoi(cm.Data[compositions.LocalMachinePoolKeyReplicas])
	if err != nil || n < 0 {
		return a, errors.Errorf("ConfigMap %s: %s %q is not a number of instances", cm.Name, compositions.LocalMachinePoolKeyReplicas, cm.Data[compositions.LocalMachinePoolKeyReplicas])
	}
	a.replicas = n
	if fds := cm.Data[compositions.LocalMachinePoolKeyFailureDomains]; fds != "" {
		if err := json.Unmarshal([]byte(fds), &a.failureDomains); err != nil {
			return a, errors.Wrapf(err, "ConfigMap %s: %s is not a JSON list", cm.Name, compositions.LocalMachinePoolKeyFailureDomains)
		}
	}
	return a, nil
}

func (g *autoScalingGroups) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cm := &corev1.ConfigMap{}
	if err := g.asks.Get(ctx, req.NamespacedName, cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	nodes := &corev1.NodeList{}
	if err := g.workload.List(ctx, nodes, client.MatchingLabels{poolLabel: cm.Name}); err != nil {
		return reconcile.Result{}, errors.Wrapf(err, "cannot list the instances of %s", cm.Name)
	}
	// Oldest first; the newest go first when the group shrinks.
	slices.SortFunc(nodes.Items, func(a, b corev1.Node) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	record := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name + compositions.LocalMachinePoolInstancesSuffix}}

	if !cm.DeletionTimestamp.IsZero() {
		for i := range nodes.Items {
			if err := client.IgnoreNotFound(g.workload.Delete(ctx, &nodes.Items[i])); err != nil {
				return reconcile.Result{}, errors.Wrapf(err, "cannot terminate instance %s", nodes.Items[i].Name)
			}
		}
		if len(nodes.Items) > 0 {
			// Terminated: look again until they are gone.
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		if err := client.IgnoreNotFound(g.workload.Delete(ctx, record)); err != nil {
			return reconcile.Result{}, errors.Wrapf(err, "cannot delete ConfigMap %s", record.Name)
		}
		if controllerutil.RemoveFinalizer(cm, poolFinalizer) {
			return reconcile.Result{}, errors.Wrapf(g.workload.Update(ctx, cm), "cannot release ConfigMap %s", cm.Name)
		}
		return reconcile.Result{}, nil
	}
	if controllerutil.AddFinalizer(cm, poolFinalizer) {
		if err := g.workload.Update(ctx, cm); err != nil {
			return reconcile.Result{}, errors.Wrapf(err, "cannot hold ConfigMap %s", cm.Name)
		}
	}
	a, err := readAsk(cm)
	if err != nil {
		// A malformed ask is the Composition's to fix; it changes the
		// ConfigMap, which brings it back here.
		ctrl.LoggerFrom(ctx).Info("Ignoring a malformed auto scaling group", "error", err.Error())
		return reconcile.Result{}, nil
	}

	running := nodes.Items
	for len(running) > a.replicas {
		last := &running[len(running)-1]
		if err := client.IgnoreNotFound(g.workload.Delete(ctx, last)); err != nil {
			return reconcile.Result{}, errors.Wrapf(err, "cannot terminate instance %s", last.Name)
		}
		running = running[:len(running)-1]
	}
	for len(running) < a.replicas {
		n, err := g.launch(ctx, cm.Name, a, running)
		if err != nil {
			return reconcile.Result{}, err
		}
		running = append(running, *n)
	}

	ids := make([]string, 0, len(running))
	for i := range running {
		ids = append(ids, running[i].Spec.ProviderID)
	}
	raw, err := json.Marshal(ids)
	if err != nil {
		return reconcile.Result{}, errors.Wrap(err, "cannot encode provider IDs")
	}
	want := map[string]string{compositions.LocalMachinePoolKeyProviderIDs: string(raw)}
	switch err := g.workload.Get(ctx, client.ObjectKeyFromObject(record), record); {
	case apierrors.IsNotFound(err):
		record.Data = want
		return reconcile.Result{}, errors.Wrapf(g.workload.Create(ctx, record), "cannot publish the instances of %s", cm.Name)
	case err != nil:
		return reconcile.Result{}, errors.Wrapf(err, "cannot read the instances of %s", cm.Name)
	case record.Data[compositions.LocalMachinePoolKeyProviderIDs] == want[compositions.LocalMachinePoolKeyProviderIDs]:
		return reconcile.Result{}, nil
	}
	record.Data = want
	return reconcile.Result{}, errors.Wrapf(g.workload.Update(ctx, record), "cannot publish the instances of %s", cm.Name)
}

// launch registers one instance of a group, in the failure domain that has
// the fewest of its instances, reporting the version asked for.
func (g *autoScalingGroups) launch(ctx context.Context, group string, a ask, running []corev1.Node) (*corev1.Node, error) {
	name := fmt.Sprintf("%s-%s", a.name, utilrand.String(5))
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{poolLabel: group}}}
	n.Spec.ProviderID = fmt.Sprintf("capxp-local:///%s/%s", a.namespace, name)
	if len(a.failureDomains) > 0 {
		count := map[string]int{}
		for i := range running {
			count[running[i].Labels[zoneLabel]]++
		}
		zone := a.failureDomains[0]
		for _, fd := range a.failureDomains[1:] {
			if count[fd] < count[zone] {
				zone = fd
			}
		}
		n.Labels[zoneLabel] = zone
	}
	if err := g.workload.Create(ctx, n); err != nil {
		return nil, errors.Wrapf(err, "cannot launch an instance of %s", group)
	}
	if a.version != "" {
		patch := client.MergeFrom(n.DeepCopy())
		n.Status.NodeInfo.KubeletVersion = a.version
		n.Status.NodeInfo.KubeProxyVersion = a.version //nolint:staticcheck // a kubelet still reports it.
		if err := g.workload.Status().Patch(ctx, n, patch); err != nil {
			return nil, errors.Wrapf(err, "cannot report the kubelet version of instance %s", n.Name)
		}
	}
	return n, nil
}
