package contracts

import (
	"bytes"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/gate"
	kubeconfigcontent "github.com/capxp/cluster-api-provider-crossplane/bridge/kubeconfig"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/outputs"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
)

// kubeconfigRecheck is how often an initialized control plane's kubeconfig
// Secret is read again. A managed service rotates the credentials in it on
// its own schedule, and the bridge never watches Secrets (it may get them,
// not list them), so rotation is a time-based wait.
const kubeconfigRecheck = time.Minute

// controlPlane is the ControlPlane seam, for a managed control plane: the
// owner is the Cluster that names the XR in spec.controlPlaneEndpoint; the
// endpoint output goes to spec.controlPlaneEndpoint, the version to
// status.version; the milestone is status.initialization.
// controlPlaneInitialized, reached once the cluster's kubeconfig Secret is
// written from the Secret the composition names.
type controlPlane struct {
	infraCluster
	// infra reads the cluster's infrastructure as for machines.
	infra infraMachine
	// written counts a write of the kubeconfig Secret, by the XR's kind.
	written func(kind string)
}

// pauseUnowned keeps a control plane XR without its Cluster paused, as a
// machine's: the service is placed in the cluster's network, which the
// gate injects once the Cluster owns it.
func (c controlPlane) PauseUnowned(xr *composite.Unstructured) *bool {
	return c.infra.PauseUnowned(xr)
}

// prepare runs the control plane's gate: closed until the cluster's
// infrastructure is provisioned; open, it injects the cluster's network
// once, which the one deferred patch sends together with the unpause.
func (c controlPlane) Prepare(ctx context.Context, s *Scope) (*verdict.Verdict, error) {
	clusterXR, forbidden, err := c.infra.clusterInfrastructure(ctx, s.Cluster)
	if err != nil || forbidden != nil {
		return forbidden, err
	}
	return inject(s, gate.DecideControlPlane(gate.ControlPlaneInputs{Cluster: s.Cluster, ClusterXR: clusterXR, XR: &s.XR.Unstructured}))
}

func (controlPlane) ConditionType() string { return infrav1.CrossplaneControlPlaneReadyCondition }

func (controlPlane) Outputs(s *Scope) (outputs.Fields, string, field.ErrorList) {
	out, errs := outputs.MapControlPlane(&s.XR.Unstructured)
	return out.Spec(), "Control plane " + out.String(), errs
}

// milestone is the ControlPlane contract's status: initialized, managed by
// a service (no control-plane Machines), and the version the service serves
// while it reports a valid one.
func (controlPlane) Milestone(xr *unstructured.Unstructured) map[string]any {
	f := map[string]any{"status.initialization.controlPlaneInitialized": true, "status.externalManagedControlPlane": true}
	if out, _ := outputs.MapControlPlane(xr); out.Version != "" {
		f["status.version"] = out.Version
	}
	return f
}

// Kubeconfig is what a control plane's Publication decides on, read as the XR
// is observed: the Secret the composition names and CAPI's
// <cluster>-kubeconfig Secret, each nil while it does not exist, and
// whether the namespace's record locks the latter.
type Kubeconfig struct {
	From           outputs.SecretKey
	Source, Target *corev1.Secret
	Locked         bool
}

// ObservePublished reads the Secrets Publish writes from and to, once the
// XR reports valid outputs and its Cluster is known.
func (c controlPlane) ObservePublished(ctx context.Context, s *Scope) error {
	out, errs := outputs.MapControlPlane(&s.XR.Unstructured)
	if len(errs) > 0 || s.Cluster == nil {
		return nil
	}
	ns := s.XR.GetNamespace()
	k := &Kubeconfig{From: out.Kubeconfig}
	var err error
	if k.Source, err = getSecret(ctx, c.client, ns, out.Kubeconfig.Name); err != nil {
		return errors.Wrapf(err, "cannot get Secret %s named by status.outputs.kubeconfig", out.Kubeconfig.Name)
	}
	target := secret.Name(s.Cluster.Name, secret.Kubeconfig)
	if k.Target, err = getSecret(ctx, c.client, ns, target); err != nil {
		return errors.Wrapf(err, "cannot get the cluster's kubeconfig Secret %s", target)
	}
	if k.Locked, err = lockedSecret(ctx, c.client, ns, target); err != nil {
		return err
	}
	s.Kubeconfig = k
	return nil
}

// getSecret reads a Secret; nil when it does not exist.
func getSecret(ctx context.Context, c client.Reader, ns, name string) (*corev1.Secret, error) {
	sec := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return sec, err
}

// Publication decides, from what ObservePublished read, how the cluster's
// <cluster>-kubeconfig Secret (CAPI's type and label, controlled by the XR)
// follows the Secret the composition names in the XR's namespace: created,
// updated whenever that changes, or left. A verdict says why it cannot yet;
// until it can, the control plane is not initialized, as CAPI would connect
// to the cluster with the kubeconfig at once.
func (c controlPlane) Publication(s *Scope) Publication {
	k := s.Kubeconfig
	if k == nil {
		return Publication{}
	}
	again := reconcile.Result{RequeueAfter: kubeconfigRecheck}
	held := func(reason, format string, args ...any) Publication {
		return Publication{Held: &verdict.Verdict{Reason: reason, Message: fmt.Sprintf(format, args...)}, Again: again}
	}
	if k.Source == nil {
		return held(infrav1.WaitingForKubeconfigReason, "Secret %s named by status.outputs.kubeconfig does not exist", k.From.Name)
	}
	raw, ok := k.Source.Data[k.From.Key]
	if !ok {
		return held(infrav1.WaitingForKubeconfigReason, "Secret %s named by status.outputs.kubeconfig has no key %s", k.From.Name, k.From.Key)
	}
	if err := kubeconfigcontent.Usable(raw); err != nil {
		return held(infrav1.InvalidKubeconfigReason, "Secret %s key %s named by status.outputs.kubeconfig holds no usable kubeconfig: %v", k.From.Name, k.From.Key, err)
	}

	owner := metav1.OwnerReference{APIVersion: s.XR.GetAPIVersion(), Kind: s.XR.GetKind(), Name: s.XR.GetName(), UID: s.XR.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	want := kubeconfig.GenerateSecretWithOwner(client.ObjectKeyFromObject(s.Cluster), raw, owner)
	have := k.Target
	unchanged := have != nil && bytes.Equal(have.Data[secret.KubeconfigDataName], raw)
	switch {
	case k.Locked && !unchanged:
		// The bridge may write what the lock refuses a tenant: it must not
		// carry a tenant's edit of the source into a Secret judged as a
		// ProviderConfig's credentials.
		return held(infrav1.KubeconfigLockedReason,
			"Secret %s is locked: a ProviderConfig of namespace %s uses it as its credentials (kubectl get namespacecredentials %s -n %s -o yaml); the bridge does not rewrite it from Secret %s: point that ProviderConfig at a copy",
			want.Name, s.XR.GetNamespace(), infrav1.NamespaceCredentialsName, s.XR.GetNamespace(), k.From.Name)
	case have == nil:
		return Publication{Again: again, Create: want,
			Event: Event{Type: corev1.EventTypeNormal, Reason: "KubeconfigWritten", Message: fmt.Sprintf("Wrote Secret %s from Secret %s", want.Name, k.From.Name)}}
	case !metav1.IsControlledBy(have, s.XR):
		return Publication{Held: &verdict.Verdict{Reason: infrav1.KubeconfigNotControlledReason,
			Message: fmt.Sprintf("Secret %s exists and is not controlled by %s %s: the bridge does not overwrite it", want.Name, s.XR.GetKind(), s.XR.GetName())}}
	case unchanged && have.Labels[clusterv1.ClusterNameLabel] == s.Cluster.Name:
		return Publication{Again: again}
	}
	have = have.DeepCopy()
	have.Data = want.Data
	if have.Labels == nil {
		have.Labels = map[string]string{}
	}
	have.Labels[clusterv1.ClusterNameLabel] = s.Cluster.Name
	return Publication{Again: again, Update: have,
		Event: Event{Type: corev1.EventTypeNormal, Reason: "KubeconfigRotated", Message: fmt.Sprintf("Updated Secret %s from Secret %s", want.Name, k.From.Name)}}
}

// Publish writes the Secret a Publication creates or updates, counts the
// write and records its event.
func (c controlPlane) Publish(ctx context.Context, s *Scope, p Publication) error {
	switch {
	case p.Create != nil:
		if err := c.client.Create(ctx, p.Create, client.FieldOwner(fieldManager)); err != nil {
			return errors.Wrapf(err, "cannot create the cluster's kubeconfig Secret %s", p.Create.Name)
		}
	case p.Update != nil:
		if err := c.client.Update(ctx, p.Update, client.FieldOwner(fieldManager)); err != nil {
			return errors.Wrapf(err, "cannot update the cluster's kubeconfig Secret %s", p.Update.Name)
		}
	default:
		return nil
	}
	c.written(s.XR.GetKind())
	s.Event(p.Event.Type, p.Event.Reason, p.Event.Message)
	return nil
}

// watches are an InfraCluster's, through the Cluster's controlPlaneRef:
// the Cluster on every event, its Machines' deletions while the XR waits
// for them (the control plane never goes before the machines that use it).
func (controlPlane) Watches(k WatchEnv, gvk schema.GroupVersionKind, _ *unstructured.Unstructured) []Watch {
	return []Watch{
		{Object: &clusterv1.Cluster{}, Map: func(_ context.Context, o client.Object) []reconcile.Request {
			if cluster, ok := o.(*clusterv1.Cluster); ok {
				return referenced(cluster, controlPlaneRef(cluster), gvk)
			}
			return nil
		}},
		machineDeletions(k.Client, controlPlaneRef, gvk),
	}
}

func controlPlaneRef(c *clusterv1.Cluster) clusterv1.ContractVersionedObjectReference {
	return c.Spec.ControlPlaneRef
}

// lockedSecret reports whether the namespace's record locks the Secret
// name: a usable ProviderConfig relies on what it holds.
func lockedSecret(ctx context.Context, c client.Reader, ns, name string) (bool, error) {
	rec := &infrav1.NamespaceCredentials{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: infrav1.NamespaceCredentialsName}, rec)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, errors.Wrapf(err, "cannot get the NamespaceCredentials of namespace %s", ns)
	}
	for _, l := range rec.Spec.Locked {
		if l.APIGroup == "" && l.Kind == "Secret" && l.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// reselects: a control plane's Composition is chosen once (only InfraClusters are re-templated in place).
func (controlPlane) Reselects() bool { return false }
