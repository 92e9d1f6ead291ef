// Package webhook is the credentials admission webhook: the handler that
// refuses an XR naming shared credentials its namespace has no grant for,
// its registration for every adapted kind, and the owner references of every
// admission object the bridge maintains.
package webhook

import (
	"context"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/apply"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/policies"
)

// Names of the credentials admission webhook.
const (
	// Path is where the manager serves the webhook.
	Path = "/validate-credentials"
	// Name names the ValidatingWebhookConfiguration (and
	// its one webhook, qualified).
	Name = "capxp-credentials"
)

// Granter decides whether a namespace may use shared credentials.
type Granter interface {
	Granted(ctx context.Context, namespace string, s credentials.Shared) (bool, string, error)
}

// CredentialsValidator rejects, at admission, a composite resource naming a
// ClusterProviderConfig its namespace has no grant for, with a message
// saying which grant is missing. It serves every adapted XR kind.
type CredentialsValidator struct {
	Granter Granter
}

// Handle implements admission.Handler.
func (v *CredentialsValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	xr := &unstructured.Unstructured{}
	if err := xr.UnmarshalJSON(req.Object.Raw); err != nil {
		return admission.Errored(http.StatusBadRequest, errors.Wrap(err, "cannot decode composite resource"))
	}
	ref := credentials.ReferenceOf(xr.Object)
	if ref == nil || ref.Kind != infrav1.ProviderConfigKindCluster {
		// A namespaced ProviderConfig is only looked up in the XR's own
		// namespace; the controller reports whether it exists.
		return admission.Allowed("")
	}
	if req.Operation == admissionv1.Update {
		old := &unstructured.Unstructured{}
		if err := old.UnmarshalJSON(req.OldObject.Raw); err == nil && ptr.Equal(credentials.ReferenceOf(old.Object), ref) {
			// Updates that keep the reference (finalizers, status, pause)
			// must go through even after a revocation: the controller
			// pauses such XRs instead.
			return admission.Allowed("")
		}
	}
	ok, msg, err := v.Granter.Granted(ctx, req.Namespace, credentials.Config(ref.APIGroup, string(ref.Kind), ref.Name))
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if !ok {
		return admission.Denied("spec.providerConfigRef: " + msg)
	}
	return admission.Allowed("")
}

// sharedCredentialsChanged is true when a request sets a providerConfigRef to
// a ClusterProviderConfig, on create or by changing the reference.
const sharedCredentialsChanged = `has(object.spec) && has(object.spec.providerConfigRef) && ` +
	`object.spec.providerConfigRef.kind == 'ClusterProviderConfig' && (request.operation == 'CREATE' || ` +
	`!has(oldObject.spec) || !has(oldObject.spec.providerConfigRef) || oldObject.spec.providerConfigRef != object.spec.providerConfigRef)`

// ClientConfig says how the API server reaches the manager's webhook
// server: a URL (outside a cluster, in tests) or a Service, and the CA bundle
// to trust. An empty CABundle leaves the field to a CA injector
// (cert-manager's), which server-side apply does not fight over.
type ClientConfig struct {
	URL              string
	ServiceName      string
	ServiceNamespace string
	ServicePort      int32
	CABundle         []byte
	// CAInjectionFrom names (namespace/name) the cert-manager Certificate
	// whose CA cert-manager's CA injector writes into the configuration.
	CAInjectionFrom string
	// CASecret names (namespace/name) the Secret of the webhook server's
	// certificate, whose ca.crt CAPI's ExtensionConfig controller writes
	// into the in-place update extension's registration (cert-manager's
	// CA injector does not know CAPI's kinds).
	CASecret string
}

// CAInjectionAnnotation asks cert-manager's CA injector to keep a webhook
// configuration's CA bundle in step with a Certificate.
const CAInjectionAnnotation = "cert-manager.io/inject-ca-from"

// Owners returns the owner references every cluster-scoped admission
// object the bridge maintains carries: the namespace of the webhook's
// Service, the manager's own, when the manager knows it. Uninstalling the
// manager with its namespace (clusterctl delete --include-namespace) then
// removes them through the garbage collector, even one the manager wrote
// again while it was being removed.
func Owners(ctx context.Context, c client.Client, cc *ClientConfig) ([]metav1.OwnerReference, error) {
	if cc == nil || cc.ServiceNamespace == "" {
		return nil, nil
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: cc.ServiceNamespace}, ns); err != nil {
		return nil, errors.Wrapf(err, "cannot get namespace %s, which owns the admission objects the bridge maintains", cc.ServiceNamespace)
	}
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: ns.Name, UID: ns.UID}}, nil
}

// Ensure applies the ValidatingWebhookConfiguration for
// every adapted XR kind, and deletes it when there is none.
func Ensure(ctx context.Context, c client.Client, live client.Reader, cc *ClientConfig, owners []metav1.OwnerReference, resources []schema.GroupResource) error {
	if cc == nil {
		return nil
	}
	cfg := &admissionregv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregv1.SchemeGroupVersion.String(), Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: Name, Labels: policies.Labels(), OwnerReferences: owners},
	}
	if cc.CAInjectionFrom != "" {
		cfg.Annotations = map[string]string{CAInjectionAnnotation: cc.CAInjectionFrom}
	}
	if len(resources) == 0 {
		return errors.Wrap(client.IgnoreNotFound(c.Delete(ctx, cfg)), "cannot delete the credentials webhook configuration")
	}
	var rules []admissionregv1.RuleWithOperations
	for _, r := range policies.NamespacedRules(resources) {
		rules = append(rules, admissionregv1.RuleWithOperations{
			Operations: []admissionregv1.OperationType{admissionregv1.Create, admissionregv1.Update}, Rule: r,
		})
	}
	clientCfg := admissionregv1.WebhookClientConfig{CABundle: cc.CABundle}
	if cc.URL != "" {
		clientCfg.URL = ptr.To(cc.URL + Path)
	} else {
		clientCfg.Service = &admissionregv1.ServiceReference{Name: cc.ServiceName, Namespace: cc.ServiceNamespace, Path: ptr.To(Path), Port: ptr.To(cc.ServicePort)}
	}
	cfg.Webhooks = []admissionregv1.ValidatingWebhook{{
		Name:                    "credentials.capxp.dev",
		ClientConfig:            clientCfg,
		Rules:                   rules,
		FailurePolicy:           ptr.To(admissionregv1.Fail),
		MatchPolicy:             ptr.To(admissionregv1.Equivalent),
		SideEffects:             ptr.To(admissionregv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
		TimeoutSeconds:          ptr.To[int32](10),
		// Only a new or changed reference to shared credentials calls the
		// webhook. It fails closed for those alone: while the manager is
		// down, nothing else about XRs (CAPI's and Crossplane's own writes
		// included) depends on it.
		MatchConditions: []admissionregv1.MatchCondition{{
			Name:       "references-shared-credentials",
			Expression: sharedCredentialsChanged,
		}},
	}}
	u, err := apply.ToUnstructured(c, cfg)
	if err != nil {
		return err
	}
	return errors.Wrap(apply.IfChanged(ctx, c, live, u), "cannot apply the credentials webhook configuration")
}
