package compositions_test

import (
	"slices"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/internal/compcheck"
)

// TestCompositionCheck runs `capxp composition check`'s code on broken
// Compositions made from the shipped ones, which must fail on exactly the
// fields they break. (The shipped ones hold on every field: TestCompositions
// converges them with the same code.)
func TestCompositionCheck(t *testing.T) {
	files, err := providerCRDs()
	if err != nil {
		t.Fatal(err)
	}
	crds, err := compcheck.LoadCRDs(files...)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason      string
		composition string
		xr          string
		// breaks the Composition; nil for the shipped one.
		breaks func(t *testing.T, comp *unstructured.Unstructured)
		// observed stand for resource templates' observations.
		observed map[string]*unstructured.Unstructured
		failing  []string
	}{
		"MissingEndpointPatch": {
			reason:      "a cluster Composition that does not report the endpoint's host",
			composition: "local/cluster.yaml", xr: "local-cluster.yaml",
			breaks:  dropPatchesTo("status.outputs.controlPlaneEndpoint.host"),
			failing: []string{compcheck.FieldEndpoint},
		},
		"ControlPlaneKubeconfigNotNamed": {
			reason:      "a control plane Composition that does not name the Secret of its kubeconfig",
			composition: "local/controlplane.yaml", xr: "local-controlplane.yaml",
			breaks:  dropPatchesTo("status.outputs.kubeconfig.name"),
			failing: []string{compcheck.FieldKubeconfig},
		},
		"ControlPlaneVersionNotReported": {
			reason:      "a control plane Composition that does not report the version the service serves",
			composition: "local/controlplane.yaml", xr: "local-controlplane.yaml",
			breaks:  dropPatchesTo("status.outputs.version"),
			failing: []string{compcheck.FieldVersion},
		},
		"EKSVersionNotReported": {
			reason:      "an EKS Composition that does not report the minor version the service runs",
			composition: "aws/controlplane.yaml", xr: "aws-controlplane.yaml",
			breaks:  dropPatchesTo("status.outputs.version"),
			failing: []string{compcheck.FieldVersion},
		},
		"EKSEndpointInUpperCase": {
			reason:      "an EKS Composition that reports the endpoint as EKS names it, in upper case, which is no host name",
			composition: "aws/controlplane.yaml", xr: "aws-controlplane.yaml",
			breaks: func(t *testing.T, comp *unstructured.Unstructured) {
				t.Helper()
				editPatches(comp, func(p map[string]any) bool {
					if p["toFieldPath"] == "status.outputs.controlPlaneEndpoint.host" {
						p["transforms"] = p["transforms"].([]any)[:1]
					}
					return true
				})
			},
			failing: []string{compcheck.FieldEndpoint},
		},
		"EKSKubeconfigNotNamed": {
			reason:      "an EKS Composition that does not name the ClusterAuth's connection secret",
			composition: "aws/controlplane.yaml", xr: "aws-controlplane.yaml",
			breaks:  dropPatchesTo("status.outputs.kubeconfig.name"),
			failing: []string{compcheck.FieldKubeconfig},
		},
		"EKSCredentialsNotPassedThrough": {
			reason:      "an EKS Composition whose managed resources keep the template's ProviderConfig name",
			composition: "aws/controlplane.yaml", xr: "aws-controlplane.yaml",
			breaks:  dropPatchesTo("spec.providerConfigRef.name"),
			failing: []string{compcheck.FieldCredentials},
		},
		"MachinePoolInstancesNotReported": {
			reason:      "a machine pool Composition that does not report its machines' provider IDs",
			composition: "local/machinepool.yaml", xr: "local-machinepool.yaml",
			breaks:  dropPatchesTo("status.outputs.providerIDList"),
			failing: []string{compcheck.FieldProviderIDList},
		},
		"AWSPoolInstancesNotListed": {
			reason:      "an aws machine pool Composition without the step that lists its group's instances",
			composition: "aws/machinepool.yaml", xr: "aws-machinepool.yaml",
			breaks:  dropStep("list-instances"),
			failing: []string{compcheck.FieldProviderIDList},
		},
		"AWSPoolCredentialsNotPassedThrough": {
			reason: "an aws machine pool Composition whose managed resources keep the template's ProviderConfig name: " +
				"function-asg-instances lists with the group's credentials, which do not exist, so the pipeline fails",
			composition: "aws/machinepool.yaml", xr: "aws-machinepool.yaml",
			breaks:  dropPatchesTo("spec.providerConfigRef.name"),
			failing: []string{compcheck.FieldCredentials, compcheck.FieldProviderIDList, compcheck.FieldReady, compcheck.FieldRenders},
		},
		"EKSPoolInstancesNotListed": {
			reason:      "an EKS machine pool Composition without the step that lists its node group's instances",
			composition: "aws/machinepool-eks.yaml", xr: "aws-eks-machinepool.yaml",
			breaks:  dropStep("list-instances"),
			failing: []string{compcheck.FieldProviderIDList},
		},
		"EKSNodeGroupWithoutAutoScalingGroup": {
			reason:      "a node group EKS reports ready but without its Auto Scaling group: nothing can be listed, and nothing is reported",
			composition: "aws/machinepool-eks.yaml", xr: "aws-eks-machinepool.yaml",
			observed: map[string]*unstructured.Unstructured{"node-group": {Object: map[string]any{"status": map[string]any{
				"atProvider": map[string]any{"id": "alpha:alpha-pool-0", "status": "ACTIVE"},
				"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2026-11-21T00:00:00Z"}},
			}}}},
			failing: []string{compcheck.FieldProviderIDList},
		},
		"CredentialsNotPassedThrough": {
			reason:      "a machine Composition whose managed resource keeps the template's ProviderConfig name",
			composition: "local/machine.yaml", xr: "local-machine.yaml",
			breaks:  dropPatchesTo("spec.providerConfigRef.name"),
			failing: []string{compcheck.FieldCredentials},
		},
		"ProviderIDNotReported": {
			reason:      "a machine Composition that does not report the provider ID",
			composition: "local/machine.yaml", xr: "local-machine.yaml",
			breaks:  dropPatchesTo("status.outputs.providerID"),
			failing: []string{compcheck.FieldProviderID},
		},
		"ProviderIDDeclaredButNotUsed": {
			reason:      "a machine Composition that declares one provider ID and registers its machine under another",
			composition: "local/machine.yaml", xr: "local-machine.yaml",
			breaks: func(t *testing.T, comp *unstructured.Unstructured) {
				t.Helper()
				comp.SetAnnotations(map[string]string{infrav1.ProviderIDAnnotation: "capxp-local:///elsewhere/{metadata.name}"})
				editPatches(comp, func(p map[string]any) bool { return p["fromFieldPath"] != "spec.providerID" })
			},
			failing: []string{compcheck.FieldProviderID},
		},
		"ProviderIDTemplateBroken": {
			reason:      "a machine Composition whose provider ID template names a field the XR does not have",
			composition: "local/machine.yaml", xr: "local-machine.yaml",
			breaks: func(t *testing.T, comp *unstructured.Unstructured) {
				t.Helper()
				comp.SetAnnotations(map[string]string{infrav1.ProviderIDAnnotation: "capxp-local:///{spec.parameters.rack}"})
			},
			failing: []string{compcheck.FieldProviderID},
		},
		"InPlaceFieldNotInSchema": {
			reason:      "a machine Composition that declares in place a field its XRD does not have",
			composition: "local/machine.yaml", xr: "local-machine.yaml",
			breaks:  annotate(infrav1.InPlaceFieldsAnnotation, "spec.parameters.rack"),
			failing: []string{compcheck.FieldInPlace},
		},
		"InPlaceCredentials": {
			reason:      "a machine Composition that declares its credentials change in place",
			composition: "local/machine.yaml", xr: "local-machine.yaml",
			breaks:  annotate(infrav1.InPlaceFieldsAnnotation, "spec.parameters.size,spec.providerConfigRef"),
			failing: []string{compcheck.FieldInPlace},
		},
		"InPlaceBootstrapNotSpec": {
			reason:      "a machine Composition that declares its hosts apply a bootstrap config's metadata",
			composition: "local/machine.yaml", xr: "local-machine.yaml",
			breaks:  annotate(infrav1.InPlaceBootstrapFieldsAnnotation, "spec.files,metadata.labels"),
			failing: []string{compcheck.FieldInPlaceBootstrap},
		},
		"InvalidForItsCRD": {
			reason:      "a managed resource with a field its CRD does not define",
			composition: "local/machine.yaml", xr: "local-machine.yaml",
			breaks: func(t *testing.T, comp *unstructured.Unstructured) {
				t.Helper()
				steps, _, _ := unstructured.NestedSlice(comp.Object, "spec", "pipeline")
				step := steps[0].(map[string]any)
				res, _, _ := unstructured.NestedSlice(step, "input", "resources")
				_ = unstructured.SetNestedField(res[0].(map[string]any), "Delete", "base", "spec", "deletionPolicyy")
				_ = unstructured.SetNestedSlice(step, res, "input", "resources")
				steps[0] = step
				_ = unstructured.SetNestedSlice(comp.Object, steps, "spec", "pipeline")
			},
			failing: []string{compcheck.FieldValid},
		},
		"CreatedNeverDeleted": {
			reason:      "a managed resource allowed to create its external resource but not to delete it",
			composition: "local/machine.yaml", xr: "local-machine.yaml",
			breaks: func(t *testing.T, comp *unstructured.Unstructured) {
				t.Helper()
				steps, _, _ := unstructured.NestedSlice(comp.Object, "spec", "pipeline")
				step := steps[0].(map[string]any)
				res, _, _ := unstructured.NestedSlice(step, "input", "resources")
				_ = unstructured.SetNestedStringSlice(res[0].(map[string]any), []string{"Observe", "Create", "Update"}, "base", "spec", "managementPolicies")
				_ = unstructured.SetNestedSlice(step, res, "input", "resources")
				steps[0] = step
				_ = unstructured.SetNestedSlice(comp.Object, steps, "spec", "pipeline")
			},
			failing: []string{compcheck.FieldDeletion},
		},
		"ObservedNeverReady": {
			reason:      "a resource whose provider reports it never ready (given observed state): the XR is not ready and reports nothing",
			composition: "local/machine.yaml", xr: "local-machine.yaml",
			observed: map[string]*unstructured.Unstructured{"node": {Object: map[string]any{"status": map[string]any{
				"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "Creating", "lastTransitionTime": "2026-11-21T00:00:00Z"}},
			}}}},
			failing: []string{compcheck.FieldReady, compcheck.FieldProviderID, compcheck.FieldFailureDomain},
		},
		"FailureDomainsMalformed": {
			reason:      "a cluster Composition that reports a failure domain's name where the list goes",
			composition: "local/cluster.yaml", xr: "local-cluster.yaml",
			breaks: func(t *testing.T, comp *unstructured.Unstructured) {
				t.Helper()
				env, _, _ := unstructured.NestedSlice(comp.Object, "spec", "pipeline")
				step := env[0].(map[string]any)
				patches, _, _ := unstructured.NestedSlice(step, "input", "environment", "patches")
				patches[0].(map[string]any)["fromFieldPath"] = "spec.parameters.failureDomains[0].name"
				_ = unstructured.SetNestedSlice(step, patches, "input", "environment", "patches")
				env[0] = step
				_ = unstructured.SetNestedSlice(comp.Object, env, "spec", "pipeline")
			},
			failing: []string{compcheck.FieldFailureDomains},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			comp := must(compositions.Read(tc.composition))
			if tc.breaks != nil {
				tc.breaks(t, comp)
			}
			xr := testdata(t, tc.xr)
			x := xrd(t, xr)
			r, err := compcheck.Check(t.Context(), engine, compcheck.Input{
				Contract: x.GetLabels()[infrav1.ContractLabel], Composition: comp, XRD: x, XR: xr, CRDs: crds, Observed: tc.observed,
			})
			if err != nil {
				t.Fatal(err)
			}
			var failing []string
			for _, v := range r.Verdicts {
				if !v.OK {
					failing = append(failing, v.Field)
					t.Logf("✗ %s: %s", v.Field, v.Reason)
				}
			}
			sort.Strings(failing)
			want := slices.Clone(tc.failing)
			sort.Strings(want)
			if !slices.Equal(failing, want) {
				t.Errorf("%s: failing fields %v, want %v", tc.reason, failing, want)
			}
		})
	}
}

// dropPatchesTo drops every patch, of a resource or of a patch set, that
// writes path.
// annotate sets one annotation of the Composition, keeping the others.
func annotate(key, value string) func(*testing.T, *unstructured.Unstructured) {
	return func(t *testing.T, comp *unstructured.Unstructured) {
		t.Helper()
		a := comp.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[key] = value
		comp.SetAnnotations(a)
	}
}

func dropPatchesTo(path string) func(*testing.T, *unstructured.Unstructured) {
	return func(t *testing.T, comp *unstructured.Unstructured) {
		t.Helper()
		if dropped := editPatches(comp, func(p map[string]any) bool { return p["toFieldPath"] != path }); dropped == 0 {
			t.Fatalf("no patch writes %s", path)
		}
	}
}

// editPatches passes every patch of the Composition's patch-and-transform
// steps, of its resources and its patch sets, to edit, which may change it
// and says whether to keep it; it returns how many were dropped.
func editPatches(comp *unstructured.Unstructured, edit func(p map[string]any) bool) int {
	steps, _, _ := unstructured.NestedSlice(comp.Object, "spec", "pipeline")
	dropped := 0
	for i, s := range steps {
		step := s.(map[string]any)
		for _, list := range []string{"resources", "patchSets"} {
			items, found, _ := unstructured.NestedSlice(step, "input", list)
			if !found {
				// Not a patch-and-transform step (function-auto-ready
				// refuses an input it does not define), or no patch sets.
				continue
			}
			for j, r := range items {
				rm := r.(map[string]any)
				patches, _, _ := unstructured.NestedSlice(rm, "patches")
				kept := patches[:0]
				for _, p := range patches {
					if !edit(p.(map[string]any)) {
						dropped++
						continue
					}
					kept = append(kept, p)
				}
				_ = unstructured.SetNestedSlice(rm, kept, "patches")
				items[j] = rm
			}
			_ = unstructured.SetNestedSlice(step, items, "input", list)
		}
		steps[i] = step
	}
	_ = unstructured.SetNestedSlice(comp.Object, steps, "spec", "pipeline")
	return dropped
}

// dropStep removes a Composition's pipeline step.
func dropStep(name string) func(t *testing.T, comp *unstructured.Unstructured) {
	return func(t *testing.T, comp *unstructured.Unstructured) {
		t.Helper()
		steps, _, _ := unstructured.NestedSlice(comp.Object, "spec", "pipeline")
		kept := slices.DeleteFunc(steps, func(s any) bool { return s.(map[string]any)["step"] == name })
		if len(kept) == len(steps) {
			t.Fatalf("no step %s", name)
		}
		_ = unstructured.SetNestedSlice(comp.Object, kept, "spec", "pipeline")
	}
}
