// Package inplace serves CAPXP's in-place update hooks (internal/hooks) on
// the manager's webhook server, with CAPI's discovery of them, and
// registers them with CAPI in an ExtensionConfig.
package inplace

import (
	"context"

	kmeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/exp/runtime/server"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/controllers/apply"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/policies"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/webhook"
	"github.com/capxp/cluster-api-provider-crossplane/internal/hooks"
)

// The hooks read CompositionRevisions; ExtensionConfig is created, and
// then only this one read and patched.
// +kubebuilder:rbac:groups=apiextensions.crossplane.io,resources=compositionrevisions,verbs=get
// +kubebuilder:rbac:groups=runtime.cluster.x-k8s.io,resources=extensionconfigs,verbs=create
// +kubebuilder:rbac:groups=runtime.cluster.x-k8s.io,resources=extensionconfigs,verbs=get;patch,resourceNames=capxp

// ExtensionConfigName names the ExtensionConfig that registers the hooks.
const ExtensionConfigName = hooks.ExtensionConfigName

// Handler names, as CAPI's discovery lists them.
const (
	canUpdateMachineSetHandler = "can-update-machine-set"
	canUpdateMachineHandler    = "can-update-machine"
	updateMachineHandler       = "update-machine"
)

// hookTimeout bounds each call: the hooks read a few objects.
var hookTimeout = ptr.To[int32](10)

// Serve registers the hooks, and CAPI's discovery of them, on the
// manager's webhook server, where the credentials webhook is served: the
// same port, certificate and Service. CAPI's Runtime SDK server library
// decodes the requests and answers discovery; it is started with the
// manager's webhook server in place of one of its own.
func Serve(mgr ctrl.Manager, e *hooks.Extension) error {
	catalog := runtimecatalog.New()
	if err := runtimehooksv1.AddToCatalog(catalog); err != nil {
		return errors.Wrap(err, "cannot build CAPI's Runtime SDK catalog")
	}
	srv, err := server.New(server.Options{Catalog: catalog})
	if err != nil {
		return errors.Wrap(err, "cannot create the in-place update extension's server")
	}
	srv.Server = sharedServer{Server: mgr.GetWebhookServer()}
	for _, h := range []*server.ExtensionHandler{
		{Hook: runtimehooksv1.CanUpdateMachineSet, Name: canUpdateMachineSetHandler, HandlerFunc: e.CanUpdateMachineSet, TimeoutSeconds: hookTimeout, FailurePolicy: ptr.To(runtimehooksv1.FailurePolicyFail)},
		{Hook: runtimehooksv1.CanUpdateMachine, Name: canUpdateMachineHandler, HandlerFunc: e.CanUpdateMachine, TimeoutSeconds: hookTimeout, FailurePolicy: ptr.To(runtimehooksv1.FailurePolicyFail)},
		{Hook: runtimehooksv1.UpdateMachine, Name: updateMachineHandler, HandlerFunc: e.UpdateMachine, TimeoutSeconds: hookTimeout, FailurePolicy: ptr.To(runtimehooksv1.FailurePolicyFail)},
	} {
		if err := srv.AddExtensionHandler(*h); err != nil {
			return errors.Wrapf(err, "cannot add the %s handler", h.Name)
		}
	}
	return errors.Wrap(mgr.Add(srv), "cannot add the in-place update extension's server")
}

// sharedServer is the manager's webhook server, which the manager starts:
// the Runtime SDK server registers its handlers on it and then only waits.
type sharedServer struct {
	crwebhook.Server
}

// Start waits until the manager stops.
func (sharedServer) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Registration applies the ExtensionConfig that registers the hooks with
// CAPI, once the manager leads. CAPI's ExtensionConfig kind is served only
// where CAPI's core CRDs are installed: without it the registration waits
// for nothing and says so.
type Registration struct {
	c      client.Client
	live   client.Reader
	config *webhook.ClientConfig
}

// NewRegistration returns the registration of the hooks served where cc
// says the API server reaches the manager's webhook server.
func NewRegistration(c client.Client, live client.Reader, cc *webhook.ClientConfig) *Registration {
	return &Registration{c: c, live: live, config: cc}
}

// NeedLeaderElection makes one replica write the ExtensionConfig.
func (r *Registration) NeedLeaderElection() bool { return true }

// Start applies the ExtensionConfig.
func (r *Registration) Start(ctx context.Context) error {
	owners, err := webhook.Owners(ctx, r.c, r.config)
	if err != nil {
		return err
	}
	u, err := ExtensionConfig(r.config, owners)
	if err != nil {
		return err
	}
	if err := apply.IfChanged(ctx, r.c, r.live, u); err != nil {
		if kmeta.IsNoMatchError(errors.Cause(err)) {
			ctrl.LoggerFrom(ctx).Info("CAPI's ExtensionConfig kind is not served: the in-place update extension is not registered")
			return nil
		}
		return errors.Wrap(err, "cannot register the in-place update extension")
	}
	return nil
}

// ExtensionConfig is the ExtensionConfig that registers the hooks: by URL
// or by the webhook Service, with the CA bundle given, or else injected by
// CAPI from the Secret of the webhook server's certificate.
func ExtensionConfig(cc *webhook.ClientConfig, owners []metav1.OwnerReference) (*unstructured.Unstructured, error) {
	ec := &runtimev1.ExtensionConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: runtimev1.GroupVersion.String(), Kind: "ExtensionConfig"},
		ObjectMeta: metav1.ObjectMeta{Name: ExtensionConfigName, Labels: policies.Labels(), OwnerReferences: owners},
	}
	if cc.CASecret != "" && len(cc.CABundle) == 0 {
		ec.Annotations = map[string]string{runtimev1.InjectCAFromSecretAnnotation: cc.CASecret}
	}
	// Every namespace: CAPI's defaulting webhook would set the empty
	// selector, and CAPI's registry matches no namespace without one.
	ec.Spec.NamespaceSelector = &metav1.LabelSelector{}
	ec.Spec.ClientConfig.CABundle = cc.CABundle
	if cc.URL != "" {
		ec.Spec.ClientConfig.URL = cc.URL
	} else {
		ec.Spec.ClientConfig.Service = runtimev1.ServiceReference{Namespace: cc.ServiceNamespace, Name: cc.ServiceName, Port: ptr.To(cc.ServicePort)}
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ec)
	if err != nil {
		return nil, errors.Wrap(err, "cannot convert the ExtensionConfig")
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}
