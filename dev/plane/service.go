package plane

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/compositions"
)

// recordControlPlane publishes what the local backend's managed control
// plane reports, as a Kubernetes service's API reports it: the version the
// workload API server serves (its /version), in the ConfigMap the local
// CrossplaneControlPlane Composition observes.
func (p *Plane) recordControlPlane(ctx context.Context) error {
	dc, err := discovery.NewDiscoveryClientForConfig(p.Workload.Config)
	if err != nil {
		return errors.Wrap(err, "cannot reach the workload API server")
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return errors.Wrap(err, "cannot read the workload API server's version")
	}
	c := p.Workload.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: compositions.LocalControlPlaneNamespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return errors.Wrapf(err, "cannot create namespace %s", ns.Name)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: compositions.LocalControlPlaneRecord}}
	want := map[string]string{compositions.LocalControlPlaneVersionKey: v.GitVersion}
	err = c.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	switch {
	case apierrors.IsNotFound(err):
		cm.Data = want
		return errors.Wrapf(c.Create(ctx, cm), "cannot create ConfigMap %s/%s", cm.Namespace, cm.Name)
	case err != nil:
		return errors.Wrapf(err, "cannot get ConfigMap %s/%s", cm.Namespace, cm.Name)
	}
	cm.Data = want
	return errors.Wrapf(c.Update(ctx, cm), "cannot update ConfigMap %s/%s", cm.Namespace, cm.Name)
}
