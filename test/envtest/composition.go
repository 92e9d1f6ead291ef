package envtest

import (
	"context"
	"encoding/json"
	"strings"

	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/function-sdk-go/logging"

	"github.com/capxp/cluster-api-provider-crossplane/internal/function"
	"github.com/capxp/cluster-api-provider-crossplane/internal/function/asginstances"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/internal/render"
)

// Annotations on an XR that script what the integration tests' Composition
// and Provider do with it.
const (
	// ObserveAnnotation holds the JSON the provider observes once the
	// composed resource is ready: outputs, failureDomains, addresses,
	// failureDomain. The Composition copies it into the composed resource and
	// each of those fields from the composed resource's status.atProvider
	// into the XR's status, as a real Composition maps a provider's
	// observations. Every {{name}} in it is replaced by the XR's name, so
	// one template scripts many XRs.
	ObserveAnnotation = "test.capxp.dev/observe"
	// FailAnnotation makes the Composition's pipeline return a fatal result
	// that names its value: function-patch-and-transform maps it through a
	// map transform that maps only the empty value.
	FailAnnotation = "test.capxp.dev/fail"
	// HoldFinalizer is what the Provider puts on composed resources, as a
	// provider does on the managed resources it must delete from a cloud;
	// tests remove it to let a composed resource go.
	HoldFinalizer = "test.capxp.dev/hold"
)

// StubGVK is the kind the integration tests' Compositions compose.
var StubGVK = schema.GroupVersionKind{Group: "test.capxp.dev", Version: "v1alpha1", Kind: "Stub"}

// CompositionName is the name of the test Composition for an XR kind.
func CompositionName(xr schema.GroupVersionKind) string {
	return "test-" + strings.ToLower(xr.Kind) + "." + xr.Group
}

// Composition is the integration tests' Composition for an XR kind, run by
// the real Crossplane and function-patch-and-transform: it composes one Stub
// that carries the XR's providerConfigRef and observation script, maps the
// Stub's observations to the XR's status and its Ready condition to the XR's
// readiness, and fails fatally while the XR has FailAnnotation.
func Composition(xr schema.GroupVersionKind) (*xpextv1.Composition, error) {
	fromXR := func(from, to string) map[string]any {
		return map[string]any{"type": "FromCompositeFieldPath", "fromFieldPath": from, "toFieldPath": to}
	}
	toXR := func(field string) map[string]any {
		return map[string]any{"type": "ToCompositeFieldPath", "fromFieldPath": "status.atProvider." + field, "toFieldPath": "status." + field}
	}
	fail := fromXR("metadata.annotations["+FailAnnotation+"]", "spec.failure")
	// Only the empty value maps: any other fails the pipeline, naming it.
	fail["transforms"] = []any{map[string]any{"type": "map", "map": map[string]any{"": ""}}}
	return PatchAndTransform(CompositionName(xr), xr, map[string]any{
		"name": "stub",
		"base": map[string]any{"apiVersion": StubGVK.GroupVersion().String(), "kind": StubGVK.Kind, "spec": map[string]any{}},
		"patches": []any{
			fromXR("metadata.annotations["+ObserveAnnotation+"]", "spec.observe"),
			fromXR("spec.providerConfigRef", "spec.providerConfigRef"),
			fail,
			toXR("outputs"), toXR("failureDomains"), toXR("addresses"), toXR("failureDomain"),
		},
	})
}

// PatchAndTransform is a Composition named name, for XRs of kind xr, of one
// step: function-patch-and-transform composing resources.
func PatchAndTransform(name string, xr schema.GroupVersionKind, resources ...any) (*xpextv1.Composition, error) {
	raw, err := json.Marshal(map[string]any{"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources", "resources": resources})
	if err != nil {
		return nil, errors.Wrap(err, "cannot encode the test Composition's input")
	}
	return &xpextv1.Composition{
		TypeMeta:   metav1.TypeMeta{APIVersion: xpextv1.SchemeGroupVersion.String(), Kind: xpextv1.CompositionKind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: xpextv1.CompositionSpec{
			CompositeTypeRef: xpextv1.TypeReferenceTo(xr),
			Mode:             xpextv1.CompositionModePipeline,
			Pipeline: []xpextv1.PipelineStep{{
				Step:        "patch-and-transform",
				FunctionRef: xpextv1.FunctionReference{Name: "crossplane-contrib-function-patch-and-transform"},
				Input:       &runtime.RawExtension{Raw: raw},
			}},
		},
	}, nil
}

// OwnFunction serves CAPXP's own composition function (function-asg-instances)
// in this process, without TLS, as the render engine calls functions, until
// ctx is done; named as the shipped Compositions call it.
func OwnFunction(ctx context.Context) (render.Function, error) {
	srv, err := function.Serve(ctx, asginstances.NewFunction(logging.NewNopLogger()), "")
	if err != nil {
		return render.Function{}, err
	}
	return render.Function{Name: release.DefaultFunctionName, Address: srv.Address}, nil
}
