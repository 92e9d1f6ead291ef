package plane

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// controlPlaneComponents are the static pods kubeadm writes on a
// control-plane host, which its kubelet mirrors into the API server. etcd is
// not among them: the plane's control planes use the workload cluster's own
// etcd as external etcd.
var controlPlaneComponents = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// controlPlaneRole and controlPlaneTaint are what kubeadm marks a
// control-plane Node with.
const controlPlaneRole = "node-role.kubernetes.io/control-plane"

var controlPlaneTaint = corev1.Taint{Key: controlPlaneRole, Effect: corev1.TaintEffectNoSchedule}

// hostnameOf is the hostname of the host a Node of a name runs on, as its
// kubelet labels the Node: the name's first DNS label (a local Node is
// named <machine>.<namespace>), at most 63 characters, as a host name and a
// label value are.
func hostnameOf(node string) string {
	host, _, _ := strings.Cut(node, ".")
	if len(host) > validation.DNS1123LabelMaxLength {
		host = strings.TrimRight(host[:validation.DNS1123LabelMaxLength], "-")
	}
	return host
}

// isControlPlaneNode reports whether a Node has the role and taint kubeadm
// marks a control-plane Node with.
func isControlPlaneNode(n *corev1.Node) bool {
	_, ok := n.Labels[controlPlaneRole]
	return ok && hasTaint(n.Spec.Taints, controlPlaneTaint)
}

// hasTaint reports whether taints hold t (by key and effect).
func hasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	for _, have := range taints {
		if have.MatchTaint(&t) {
			return true
		}
	}
	return false
}

// kubelets stands in for what a Machine's kubelet reports beyond what kwok
// simulates: the version it runs, which is the Machine's (the bootstrap data
// installs the kubelet of spec.version), and, on a control-plane host, the
// mirror pods of the static pods kubeadm wrote, which kwok then runs on the
// Node, the hostname label a kubelet sets, and the role and taint kubeadm
// marks a control-plane Node with. kwok keeps a
// Node's reported versions once they are set.
//
// With the AWS API emulator (Options.AWS), it also stands in for the kubelet
// of an EC2 instance the emulator runs, which never boots: once a Machine's
// providerID names one (aws:///<zone>/<instance>), its Node registers in the
// workload cluster, named after the instance, in its zone, as the kubelet
// of a booted instance would.
type kubelets struct {
	mgmt     client.Client
	workload client.Client
	aws      bool
}

// standInForKubelets runs kubelets in CAPI's manager: the Machines', and
// with the AWS API emulator those of the instances of machine pools.
func (p *Plane) standInForKubelets(mgr ctrl.Manager) error {
	err := builder.ControllerManagedBy(mgr).
		Named("plane-kubelets").
		For(&clusterv1.Machine{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2, SkipNameValidation: ptr.To(true)}).
		Complete(&kubelets{mgmt: mgr.GetClient(), workload: p.Workload.Client, aws: p.opts.AWS})
	if err != nil || !p.opts.AWS {
		return errors.Wrap(err, "cannot run the plane's stand-in for kubelets")
	}
	err = builder.ControllerManagedBy(mgr).
		Named("plane-pool-kubelets").
		For(&clusterv1.MachinePool{}).
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		Complete(&poolKubelets{mgmt: mgr.GetClient(), workload: p.Workload.Client})
	return errors.Wrap(err, "cannot run the plane's stand-in for the kubelets of machine pools")
}

// poolKubelets stands in for the kubelets of the EC2 instances of a
// MachinePool the emulator runs, which never boot: once the pool's
// spec.providerIDList names an instance, its Node registers in the workload
// cluster, named after the instance, in its zone, reporting the pool's
// version. Removing a Node whose instance is gone is CAPI's (the
// MachinePool controller deletes the Nodes of retired instances).
type poolKubelets struct {
	mgmt     client.Client
	workload client.Client
}

func (k *poolKubelets) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	mp := &clusterv1.MachinePool{}
	if err := k.mgmt.Get(ctx, req.NamespacedName, mp); err != nil || !mp.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	for _, id := range mp.Spec.ProviderIDList {
		zone, instance, ok := awsInstance(id)
		if !ok {
			continue
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: instance, Labels: map[string]string{zoneLabel: zone, corev1.LabelHostname: instance}},
			Spec: corev1.NodeSpec{ProviderID: id}}
		if err := k.workload.Create(ctx, n); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return reconcile.Result{}, errors.Wrapf(err, "cannot register the Node of instance %s", instance)
		}
		if v := mp.Spec.Template.Spec.Version; v != "" {
			patch := client.MergeFrom(n.DeepCopy())
			n.Status.NodeInfo.KubeletVersion = v
			if err := k.workload.Status().Patch(ctx, n, patch); err != nil {
				return reconcile.Result{}, errors.Wrapf(err, "cannot report the kubelet version of Node %s", n.Name)
			}
		}
	}
	return reconcile.Result{}, nil
}

func (k *kubelets) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := &clusterv1.Machine{}
	if err := k.mgmt.Get(ctx, req.NamespacedName, m); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if k.aws && m.DeletionTimestamp.IsZero() && !m.Status.NodeRef.IsDefined() {
		if zone, instance, ok := awsInstance(m.Spec.ProviderID); ok {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: instance, Labels: map[string]string{zoneLabel: zone, corev1.LabelHostname: instance}},
				Spec: corev1.NodeSpec{ProviderID: m.Spec.ProviderID}}
			return reconcile.Result{}, errors.Wrapf(client.IgnoreAlreadyExists(k.workload.Create(ctx, n)), "cannot register the Node of instance %s", instance)
		}
	}
	if !m.DeletionTimestamp.IsZero() || !m.Status.NodeRef.IsDefined() || m.Spec.Version == "" {
		return reconcile.Result{}, nil
	}
	node := &corev1.Node{}
	if err := k.workload.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(errors.Wrapf(err, "cannot read the Node of Machine %s", m.Name))
	}
	if node.Status.NodeInfo.KubeletVersion != m.Spec.Version {
		patch := client.MergeFrom(node.DeepCopy())
		node.Status.NodeInfo.KubeletVersion = m.Spec.Version
		node.Status.NodeInfo.KubeProxyVersion = m.Spec.Version //nolint:staticcheck // a kubelet still reports it.
		if err := k.workload.Status().Patch(ctx, node, patch); err != nil {
			return reconcile.Result{}, errors.Wrapf(err, "cannot report the kubelet version of Node %s", node.Name)
		}
	}
	// A kubelet labels its Node with its hostname, which
	// Pods' topology spread and anti-affinity key on; kubeadm marks a
	// control-plane Node with its role and keeps workloads off it.
	_, controlPlane := m.Labels[clusterv1.MachineControlPlaneLabel]
	hostname := hostnameOf(node.Name)
	if node.Labels[corev1.LabelHostname] != hostname || controlPlane && !isControlPlaneNode(node) {
		patch := client.MergeFrom(node.DeepCopy())
		metav1.SetMetaDataLabel(&node.ObjectMeta, corev1.LabelHostname, hostname)
		if controlPlane {
			metav1.SetMetaDataLabel(&node.ObjectMeta, controlPlaneRole, "")
			if !hasTaint(node.Spec.Taints, controlPlaneTaint) {
				node.Spec.Taints = append(node.Spec.Taints, controlPlaneTaint)
			}
		}
		if err := k.workload.Patch(ctx, node, patch); err != nil {
			return reconcile.Result{}, errors.Wrapf(err, "cannot label Node %s as its kubelet and kubeadm would", node.Name)
		}
	}
	if !controlPlane {
		return reconcile.Result{}, nil
	}
	for _, c := range controlPlaneComponents {
		if err := k.workload.Create(ctx, mirrorPod(c, node)); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, errors.Wrapf(err, "cannot mirror the %s static pod of Node %s", c, node.Name)
		}
	}
	return reconcile.Result{}, nil
}

// mirrorPod is the mirror pod a kubelet creates for the static pod of a
// control-plane component, as kubeadm names and labels it, owned by its Node
// so that it goes with it.
func mirrorPod(component string, node *corev1.Node) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   metav1.NamespaceSystem,
			Name:        fmt.Sprintf("%s-%s", component, node.Name),
			Labels:      map[string]string{"component": component, "tier": "control-plane"},
			Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "plane"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:    node.Name,
			Containers:  []corev1.Container{{Name: component, Image: "registry.k8s.io/" + component}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
	}
}

// awsInstance splits an EC2 providerID, aws:///<zone>/<instance>.
func awsInstance(providerID string) (zone, instance string, ok bool) {
	rest, ok := strings.CutPrefix(providerID, "aws:///")
	if !ok {
		return "", "", false
	}
	zone, instance, ok = strings.Cut(rest, "/")
	return zone, instance, ok && zone != "" && instance != ""
}
