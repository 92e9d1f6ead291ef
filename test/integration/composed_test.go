package integration

import (
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// compositeLabel is the label Crossplane puts on what it composed for an XR.
const compositeLabel = "crossplane.io/composite"

// stubs lists the Stubs Crossplane composed in a namespace.
func stubs(g Gomega, ns string, opts ...client.ListOption) []unstructured.Unstructured {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(envtest.StubGVK.GroupVersion().WithKind(envtest.StubGVK.Kind + "List"))
	g.Expect(env.Client.List(ctx, l, append(opts, client.InNamespace(ns))...)).To(Succeed())
	return l.Items
}

// composedOf is the one Stub Crossplane composed for an XR.
func composedOf(g Gomega, xr *unstructured.Unstructured) *unstructured.Unstructured {
	s := stubs(g, xr.GetNamespace(), client.MatchingLabels{compositeLabel: xr.GetName()})
	g.Expect(s).To(HaveLen(1), "Crossplane composes one Stub for %s", xr.GetName())
	return &s[0]
}

// composedCRD reads the CRD of a composed resource's kind (metadata only).
func composedCRD(g Gomega, composed *unstructured.Unstructured) *metav1.PartialObjectMetadata {
	gvk := composed.GroupVersionKind()
	m, err := env.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	g.Expect(err).NotTo(HaveOccurred())
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: m.Resource.Resource + "." + gvk.Group}, crd)).To(Succeed())
	return crd
}

// release lets a composed resource go, as its provider does once the
// external resource is deleted.
func release(g Gomega, composed *unstructured.Unstructured) {
	change(g, composed, func() { controllerutil.RemoveFinalizer(composed, envtest.HoldFinalizer) })
}

// responsive asserts that Crossplane's watch circuit breaker never opened on
// an XR: the bridge's writes did not flood Crossplane with events.
func responsive(g Gomega, xr *unstructured.Unstructured) {
	c := xrCondition(xr, "Responsive")
	if c != nil {
		g.Expect(c).To(HaveKeyWithValue("status", "True"), "Crossplane's watch circuit opened on %s %s: %v", xr.GetKind(), xr.GetName(), c)
	}
}
