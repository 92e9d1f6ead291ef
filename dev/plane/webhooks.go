package plane

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// registerWebhooks registers the webhook configurations a CAPI binary ships
// (its config/webhook/manifests.yaml) for the process the plane runs it
// as: each webhook's Service (webhook-service, at the path the binary
// serves) becomes the process's webhook server at url and the same path,
// trusted through caPEM, as cert-manager's CA injection and the Service
// would make it. Each configuration is named after the process, so that
// two binaries' configurations, both named as kubebuilder names them, do
// not replace each other.
func (p *Plane) registerWebhooks(ctx context.Context, process, file, url string, caPEM []byte) error {
	objs, err := webhookConfigurations(file, process, url, caPEM)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := p.client.Create(ctx, o); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				return errors.Wrapf(err, "cannot register %s's webhooks %s", process, o.GetName())
			}
			cur := o.DeepCopyObject().(client.Object) //nolint:forcetypeassert // a copy of itself
			if err := p.client.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
				return errors.Wrapf(err, "cannot get %s's webhooks %s", process, o.GetName())
			}
			o.SetResourceVersion(cur.GetResourceVersion())
			if err := p.client.Update(ctx, o); err != nil {
				return errors.Wrapf(err, "cannot update %s's webhooks %s", process, o.GetName())
			}
		}
	}
	return nil
}

// webhookConfigurations reads the mutating and validating webhook
// configurations of a file and points them at url (registerWebhooks).
func webhookConfigurations(file, process, url string, caPEM []byte) ([]client.Object, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, errors.Wrap(err, "cannot read CAPI's webhook configurations")
	}
	// point makes a webhook's Service the process's server at url.
	point := func(webhook string, cc *admissionv1.WebhookClientConfig) error {
		if cc.Service == nil {
			return errors.Errorf("%s: webhook %s names no Service", file, webhook)
		}
		u := url
		if cc.Service.Path != nil {
			u += *cc.Service.Path
		}
		*cc = admissionv1.WebhookClientConfig{URL: ptr.To(u), CABundle: caPEM}
		return nil
	}
	var out []client.Object
	docs := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, errors.Wrapf(err, "cannot read %s", file)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, errors.Wrapf(err, "cannot parse %s", file)
		}
		var c client.Object
		switch tm.Kind {
		case "MutatingWebhookConfiguration":
			m := &admissionv1.MutatingWebhookConfiguration{}
			c, err = pointed(file, doc, m, &m.Webhooks, func(w *admissionv1.MutatingWebhook) (string, *admissionv1.WebhookClientConfig) {
				return w.Name, &w.ClientConfig
			}, point)
		case "ValidatingWebhookConfiguration":
			v := &admissionv1.ValidatingWebhookConfiguration{}
			c, err = pointed(file, doc, v, &v.Webhooks, func(w *admissionv1.ValidatingWebhook) (string, *admissionv1.WebhookClientConfig) {
				return w.Name, &w.ClientConfig
			}, point)
		case "":
			continue
		default:
			return nil, errors.Errorf("%s holds a %s, not a webhook configuration", file, tm.Kind)
		}
		if err != nil {
			return nil, err
		}
		c.SetName(process + "-" + c.GetName())
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.Errorf("%s holds no webhook configuration", file)
	}
	return out, nil
}

// pointed parses doc, of file, into c, a webhook configuration whose
// webhooks are webhooks, and points each webhook (its name and client
// configuration, as hook reads them) at the process.
func pointed[W any](file string, doc []byte, c client.Object, webhooks *[]W, hook func(*W) (string, *admissionv1.WebhookClientConfig), point func(string, *admissionv1.WebhookClientConfig) error) (client.Object, error) {
	if err := yaml.Unmarshal(doc, c); err != nil {
		return nil, errors.Wrapf(err, "cannot parse %s", file)
	}
	for i := range *webhooks {
		if err := point(hook(&(*webhooks)[i])); err != nil {
			return nil, err
		}
	}
	return c, nil
}
