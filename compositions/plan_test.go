package compositions_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/internal/compcheck"
	"github.com/capxp/cluster-api-provider-crossplane/internal/plan"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/internal/render"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// TestPlanRendersTheAWSBackendOffline plans changes of aws clusters as
// capxp plan does, with the real engine and functions and no AWS: a
// cluster composed as far as two failure domains take it is given a third
// (the subnets and route table associations of the third zone are created,
// nothing is deleted), and a composed cluster's load balancer is made
// internet-facing (the load balancer changes, and moves to the public
// subnets). Each expectation is the Composition's design, not a render.
func TestPlanRendersTheAWSBackendOffline(t *testing.T) {
	third := func(xr *unstructured.Unstructured) {
		fds, _, _ := unstructured.NestedSlice(xr.Object, "spec", "parameters", "failureDomains")
		fds = append(fds, map[string]any{"name": "eu-west-1c", "controlPlane": true})
		_ = unstructured.SetNestedSlice(xr.Object, fds, "spec", "parameters", "failureDomains")
	}
	cases := map[string]struct {
		reason string
		xr     string
		// setup is the cluster as it was composed, before the change.
		setup    func(*unstructured.Unstructured)
		change   func(*unstructured.Unstructured)
		created  []string
		deleted  []string
		changed  map[string][]string
		replaces bool
	}{
		"AThirdFailureDomain": {
			reason:  "The third zone's subnets and their route table associations are created; what exists stays.",
			xr:      "aws-cluster-two-zones.yaml",
			change:  third,
			created: []string{"private-route-table-association-2", "public-route-table-association-2", "subnet-private-2", "subnet-public-2"},
		},
		"AnInternetFacingLoadBalancer": {
			reason: "The load balancer's scheme changes, and with it the subnets it selects: public ones.",
			xr:     "aws-cluster-two-zones.yaml",
			setup:  third,
			change: func(xr *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(xr.Object, "InternetFacing", "spec", "parameters", "controlPlaneLoadBalancer", "scheme")
			},
			changed: map[string][]string{"control-plane-load-balancer": {"spec.forProvider.internal", "spec.forProvider.subnetSelector.matchLabels.capxp.dev/subnet-role"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			comp := must(compositions.Read("aws/cluster.yaml"))
			xr := testdata(t, tc.xr)
			if tc.setup != nil {
				tc.setup(xr)
			}
			// Composed as the providers report it, round after round.
			var observed []*unstructured.Unstructured
			for range 4 {
				out, err := engine.Render(ctx, render.Input{XR: xr, Composition: comp, XRD: xrd(t, xr), Observed: observed})
				if err != nil {
					t.Fatal(err)
				}
				xr, observed = compcheck.Applied(xr, out.XR), compcheck.ProvideAll(out.Composed)
			}
			objs := []client.Object{comp}
			refs := make([]any, 0, len(observed))
			for i, o := range observed {
				if o.GetName() == "" {
					o.SetName(fmt.Sprintf("%s-%d", xr.GetName(), i))
				}
				o.SetNamespace(xr.GetNamespace())
				objs = append(objs, o)
				refs = append(refs, map[string]any{"apiVersion": o.GetAPIVersion(), "kind": o.GetKind(), "name": o.GetName()})
			}
			_ = unstructured.SetNestedSlice(xr.Object, refs, "spec", "crossplane", "resourceRefs")
			_ = unstructured.SetNestedField(xr.Object, comp.GetName(), "spec", "crossplane", "compositionRef", "name")
			objs = append(objs, xr)
			c := fake.NewClientBuilder().WithScheme(plan.Scheme()).WithObjects(objs...).Build()

			proposed := xr.DeepCopy()
			tc.change(proposed)
			o := &plan.Observed{InfraClusters: map[string]*unstructured.Unstructured{xr.GetName(): xr}}
			p, err := plan.Predict(ctx, c, engine, nil, o, []*unstructured.Unstructured{proposed}, metav1.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(p.XRs) != 1 {
				t.Fatalf("%s\nthe plan predicts %d XRs, want the cluster's: %+v", tc.reason, len(p.XRs), p.XRs)
			}
			x := p.XRs[0]
			if len(x.Unknown) > 0 {
				t.Errorf("%s\nthe plan cannot say: %v", tc.reason, x.Unknown)
			}
			created, deleted, changed := x.Actions()
			if !slices.Equal(created, tc.created) || !slices.Equal(deleted, tc.deleted) {
				t.Errorf("%s\ncreated %v, deleted %v; want created %v, deleted %v", tc.reason, created, deleted, tc.created, tc.deleted)
			}
			for r, want := range tc.changed {
				if !slices.Equal(changed[r], want) {
					t.Errorf("%s\n%s: changed %v, want %v (all changes: %v)", tc.reason, r, changed[r], want, changed)
				}
			}
			if len(tc.changed) == 0 && len(changed) > 0 {
				t.Errorf("%s\nchanged %v, want nothing changed", tc.reason, changed)
			}
		})
	}
}

// TestPlanReadsTheCompositionsConfiguration builds the release's
// Compositions Configuration with the crossplane CLI, as `make release`
// does, and reads it as `capxp plan --package` does: every shipped
// Composition is planned, and the XRDs are named as not planned. A package
// of another kind is refused.
func TestPlanReadsTheCompositionsConfiguration(t *testing.T) {
	cli := envtest.Tool("crossplane-cli", crossplaneCLIVersion)
	if _, err := os.Stat(cli); err != nil {
		t.Fatalf("the crossplane CLI is missing: run `hack/ensure-tools.sh crossplane-cli`: %v", err)
	}
	dir := t.TempDir()
	root, file := filepath.Join(dir, "root"), filepath.Join(dir, "compositions.xpkg")
	if err := release.WriteCompositionsRoot(root, release.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := release.BuildPackage(t.Context(), cli, root, file, ""); err != nil {
		t.Fatal(err)
	}
	pkg, err := plan.ReadPackage(file)
	if err != nil {
		t.Fatal(err)
	}
	var want, wantXRDs []string
	for _, b := range compositions.Backends {
		for _, c := range must(compositions.ReadDir(b)) {
			want = append(want, c.GetName())
		}
	}
	got := make([]string, 0, len(pkg.Compositions))
	for _, c := range pkg.Compositions {
		got = append(got, c.GetName())
	}
	slices.Sort(got)
	slices.Sort(want)
	if pkg.Name != "capxp-compositions" || !slices.Equal(got, want) {
		t.Errorf("package %s holds Compositions %v, want the shipped %v", pkg.Name, got, want)
	}
	for _, x := range must(compositions.ReadDir("xrds")) {
		wantXRDs = append(wantXRDs, x.GetName())
	}
	slices.Sort(pkg.XRDs)
	slices.Sort(wantXRDs)
	if !slices.Equal(pkg.XRDs, wantXRDs) {
		t.Errorf("package XRDs %v, want the shipped %v", pkg.XRDs, wantXRDs)
	}

	// A Function's package is not a Configuration.
	fn, err := os.CreateTemp(dir, "function-*.xpkg")
	if err != nil {
		t.Fatal(err)
	}
	fnRoot := filepath.Join(dir, "fn")
	if err := release.WriteFunctionRoot(fnRoot, release.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := release.BuildPackage(t.Context(), cli, fnRoot, fn.Name(), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := plan.ReadPackage(fn.Name()); err == nil || !strings.Contains(err.Error(), "not a Configuration") {
		t.Errorf("a Function package: got %v, want it refused as not a Configuration", err)
	}
}
