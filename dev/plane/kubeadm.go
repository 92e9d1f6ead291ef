package plane

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// What `kubeadm init` leaves in a cluster that the kubeadm control plane
// provider reads to learn that the control plane is initialized.
const (
	kubeadmConfigMap = "kubeadm-config"
	// kubeadmConfigFile is where the kubeadm bootstrap provider's cloud-init
	// writes kubeadm's configuration on the host.
	kubeadmConfigFile = "/run/kubeadm/kubeadm.yaml"
	// kubeProxyName names kube-proxy's DaemonSet, its pods' label and its
	// container, as kubeadm's addon does.
	kubeProxyName = "kube-proxy"
)

// kubeadmHosts stands in for `kubeadm init` on the hosts of control-plane
// Machines, as the local backend's Nodes stand in for their kubelets: once a
// control-plane Machine has its infrastructure (a providerID) and bootstrap
// data that runs `kubeadm init`, it uploads the ClusterConfiguration of that
// data to the workload cluster's kube-system/kubeadm-config ConfigMap and
// installs kube-proxy's DaemonSet (kubeProxy), as kubeadm does. Nothing
// else of kubeadm runs: no static pods, no etcd
// members, which the kubeadm control plane provider reports as unhealthy.
type kubeadmHosts struct {
	mgmt     client.Client
	workload client.Client
}

// standInForKubeadm runs kubeadmHosts in CAPI's manager.
func (p *Plane) standInForKubeadm(mgr ctrl.Manager) error {
	controlPlane := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[clusterv1.MachineControlPlaneLabel]
		return ok
	})
	err := builder.ControllerManagedBy(mgr).
		Named("plane-kubeadm-hosts").
		For(&clusterv1.Machine{}, builder.WithPredicates(controlPlane)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, SkipNameValidation: ptr.To(true)}).
		Complete(&kubeadmHosts{mgmt: mgr.GetClient(), workload: p.Workload.Client})
	return errors.Wrap(err, "cannot run the plane's stand-in for kubeadm on control-plane hosts")
}

func (k *kubeadmHosts) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := &clusterv1.Machine{}
	if err := k.mgmt.Get(ctx, req.NamespacedName, m); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	secret := m.Spec.Bootstrap.DataSecretName
	if !m.DeletionTimestamp.IsZero() || m.Spec.ProviderID == "" || secret == nil || *secret == "" {
		return reconcile.Result{}, nil // not booted yet, or going
	}
	data := &corev1.Secret{}
	if err := k.mgmt.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: *secret}, data); err != nil {
		return reconcile.Result{}, errors.Wrapf(err, "cannot read the bootstrap data of Machine %s", m.Name)
	}
	cfg, err := initClusterConfiguration(data.Data["value"])
	if err != nil || cfg == "" {
		return reconcile.Result{}, errors.Wrapf(err, "cannot read the bootstrap data of Machine %s", m.Name)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: kubeadmConfigMap},
		Data:       map[string]string{"ClusterConfiguration": cfg},
	}
	if err := k.workload.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return reconcile.Result{}, errors.Wrapf(err, "cannot upload the kubeadm configuration of Machine %s", m.Name)
	}
	ds, err := kubeProxy(cfg, m.Spec.Version)
	if err != nil {
		return reconcile.Result{}, errors.Wrapf(err, "cannot read the kubeadm configuration of Machine %s", m.Name)
	}
	if err := k.workload.Create(ctx, ds); err != nil && !apierrors.IsAlreadyExists(err) {
		return reconcile.Result{}, errors.Wrapf(err, "cannot install kube-proxy for Machine %s", m.Name)
	}
	return reconcile.Result{}, nil
}

// kubeProxy is the kube-proxy DaemonSet `kubeadm init` installs with its
// kube-proxy addon, reduced to what the kubeadm control plane provider
// reads and writes: its kube-proxy container's image, from the
// ClusterConfiguration's imageRepository (registry.k8s.io by default) at
// the version being initialized, which the provider moves to each new
// version on an upgrade. The workload cluster's kube-controller-manager
// runs no daemonset controller, so it makes no pods.
func kubeProxy(clusterConfiguration, version string) (*appsv1.DaemonSet, error) {
	var cfg struct {
		ImageRepository string `json:"imageRepository"`
	}
	if err := yaml.Unmarshal([]byte(clusterConfiguration), &cfg); err != nil {
		return nil, errors.Wrap(err, "cannot parse the ClusterConfiguration")
	}
	repo := cfg.ImageRepository
	if repo == "" {
		repo = "registry.k8s.io"
	}
	labels := map[string]string{"k8s-app": kubeProxyName}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: kubeProxyName, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork:       true,
					PriorityClassName: "system-node-critical",
					Tolerations:       []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name: kubeProxyName,
						// An image tag has no "+": kubeadm writes a version's build metadata with "_".
						Image:   repo + "/" + kubeProxyName + ":" + strings.ReplaceAll(version, "+", "_"),
						Command: []string{"/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf", "--hostname-override=$(NODE_NAME)"},
					}},
				},
			},
		},
	}, nil
}

// initClusterConfiguration finds, in cloud-init bootstrap data that runs
// `kubeadm init`, the ClusterConfiguration document of the kubeadm
// configuration it writes; "" when the data does not run `kubeadm init`
// (a host joining a control plane).
func initClusterConfiguration(cloudInit []byte) (string, error) {
	if !bytes.Contains(cloudInit, []byte("kubeadm init")) {
		return "", nil
	}
	var ci struct {
		WriteFiles []struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		} `json:"write_files"`
	}
	if err := yaml.Unmarshal(cloudInit, &ci); err != nil {
		return "", errors.Wrap(err, "cannot parse the cloud-init data")
	}
	for _, f := range ci.WriteFiles {
		if f.Path != kubeadmConfigFile {
			continue
		}
		docs := yaml.NewYAMLReader(bufio.NewReader(strings.NewReader(f.Content)))
		for {
			doc, err := docs.Read()
			if errors.Is(err, io.EOF) {
				return "", errors.Errorf("%s holds no ClusterConfiguration", kubeadmConfigFile)
			}
			if err != nil {
				return "", errors.Wrapf(err, "cannot read %s", kubeadmConfigFile)
			}
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				return "", errors.Wrapf(err, "cannot parse %s", kubeadmConfigFile)
			}
			if meta.Kind == "ClusterConfiguration" {
				return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(doc)), "---")) + "\n", nil
			}
		}
	}
	return "", errors.Errorf("the data runs kubeadm init but writes no %s", kubeadmConfigFile)
}
