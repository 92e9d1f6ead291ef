package controllers

// Revocation where credentials are used: when a namespace's record stops
// listing a config, every managed resource of the namespace that names it
// is paused, found by what it names, whatever state its XR is in.

import (
	"context"
	"strings"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	xpmeta "github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
)

// revokePageSize is how many managed resources of one kind a revocation
// reads at a time.
const revokePageSize = 500

// managedKind is a served kind of an enforced provider's managed resources.
type managedKind struct {
	gvk      schema.GroupVersionKind
	provider credentials.Provider
}

// managedKinds returns the namespaced managed resource kinds of the
// enforced providers whose CRDs are installed (a CRD's name is
// plural.group), their credentials kinds left out.
func (r *nsCredentials) managedKinds(ctx context.Context) ([]managedKind, error) {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(extv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList"))
	if err := r.client.List(ctx, l); err != nil {
		return nil, errors.Wrap(err, "cannot list CRDs")
	}
	var out []managedKind
	for i := range l.Items {
		plural, group, _ := strings.Cut(l.Items[i].Name, ".")
		for _, p := range r.providers {
			if !p.Manages(group) {
				continue
			}
			gvk, err := r.client.RESTMapper().KindFor(schema.GroupVersionResource{Group: group, Resource: plural})
			if err != nil {
				// Not served yet: nothing of it exists to pause.
				continue
			}
			m, err := r.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil || m.Scope.Name() != meta.RESTScopeNameNamespace || isCredentialsKind(gvk.Kind) {
				continue
			}
			out = append(out, managedKind{gvk: gvk, provider: p})
		}
	}
	return out, nil
}

func isCredentialsKind(kind string) bool {
	for _, k := range credentialsKinds {
		if k == kind {
			return true
		}
	}
	return false
}

// revoke pauses every managed resource of the namespace that names a config
// spec does not list, and resumes those it paused whose config spec lists
// again. It reads each kind uncached, page by page: the bridge does not
// cache managed resources, and a revocation is rare. A kind the bridge may
// not list is logged and skipped (admission still refuses its new
// resources); every other error is returned once all kinds were tried.
func (r *nsCredentials) revoke(ctx context.Context, ns string, spec *infrav1.NamespaceCredentialsSpec) error {
	kinds, err := r.managedKinds(ctx)
	if err != nil {
		return err
	}
	log := ctrl.LoggerFrom(ctx)
	var errs []error
	for _, k := range kinds {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
		for cont := ""; ; {
			l.Items = nil
			err := r.live.List(ctx, l, client.InNamespace(ns), client.Limit(revokePageSize), client.Continue(cont))
			if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				log.Error(err, "Cannot list managed resources to pause those whose credentials were revoked: grant the manager list and patch on them", "kind", k.gvk.String())
				break
			}
			if err != nil {
				errs = append(errs, errors.Wrapf(err, "cannot list %s", k.gvk.Kind))
				break
			}
			for i := range l.Items {
				if err := r.revokeOne(ctx, &l.Items[i], k.provider, spec); err != nil {
					errs = append(errs, err)
				}
			}
			if cont = l.GetContinue(); cont == "" {
				break
			}
		}
	}
	return kerrors.NewAggregate(errs)
}

// revokeOne pauses or resumes one managed resource, with the
// resourceVersion it was read at: a resource whose reference changed since
// is decided again.
func (r *nsCredentials) revokeOne(ctx context.Context, mr *unstructured.Unstructured, p credentials.Provider, spec *infrav1.NamespaceCredentialsSpec) error {
	kind, _, _ := unstructured.NestedString(mr.Object, "spec", "providerConfigRef", "kind")
	name, _, _ := unstructured.NestedString(mr.Object, "spec", "providerConfigRef", "name")
	admitted := credentials.Admits(spec, p.ConfigGroup, kind, name)
	set, remove := credentials.Revocation(mr.GetAnnotations(), admitted)
	if set == nil && remove == nil {
		return nil
	}
	orig := mr.DeepCopy()
	xpmeta.AddAnnotations(mr, set)
	xpmeta.RemoveAnnotations(mr, remove...)
	err := r.client.Patch(ctx, mr, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(fieldManager))
	if err = client.IgnoreNotFound(err); err != nil {
		return errors.Wrapf(err, "cannot pause or resume %s %s", mr.GetKind(), mr.GetName())
	}
	if !admitted {
		ctrl.LoggerFrom(ctx).Info("Paused managed resource: the credentials it names were revoked", "kind", mr.GetKind(), "name", mr.GetName(),
			"providerConfig", kind+"/"+name)
	}
	return nil
}
