//go:build e2e

package capie2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	capie2e "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

// The test extension's Deployment and Service (data/test-extension.yaml),
// which the RuntimeSDK spec's ExtensionConfig names.
const (
	testExtensionNamespace = "test-extension-system"
	testExtensionName      = "test-extension"
	testExtensionService   = "test-extension-webhook-service"
)

// runtimeSDKClassFile is the ClusterClass the e2e-upgrades-runtimesdk
// flavor names, which addFlavors makes from the release's crossplane-local.
const runtimeSDKClassFile = "clusterclass-crossplane-local-runtimesdk.yaml"

// runtimeSDKClass makes, from the release's ClusterClass crossplane-local,
// the class ClusterUpgradeRuntimeSDKSpec runs on: crossplane-local-runtimesdk,
// whose patches include the test extension's external ones (its
// GeneratePatches, ValidateTopology and DiscoverVariables, named after the
// spec's ExtensionConfig), as CAPI's own quick-start-runtimesdk class does.
// The class asks no upgrade plan of the extension: CAPI's test extension
// plans from the Kubernetes versions kind publishes, and the spec checks
// the one-minor plan CAPI makes without one.
func runtimeSDKClass(release []byte) ([]byte, error) {
	return derivedClass(release, "crossplane-local-runtimesdk", "runtimeSDKClass", func(u *unstructured.Unstructured) error {
		if u.GetKind() != "ClusterClass" {
			return nil
		}
		patches, _, err := unstructured.NestedSlice(u.Object, "spec", "patches")
		if err != nil {
			return err
		}
		ext := "${EXTENSION_CONFIG_NAME:-k8s-upgrade-with-runtimesdk}"
		patches = append(patches, map[string]any{
			"name": "test-patch",
			"external": map[string]any{
				"generatePatchesExtension":   "generate-patches." + ext,
				"validateTopologyExtension":  "validate-topology." + ext,
				"discoverVariablesExtension": "discover-variables." + ext,
			},
		})
		return unstructured.SetNestedSlice(u.Object, patches, "spec", "patches")
	})
}

// runTestExtension installs CAPI's test extension (data/test-extension.yaml)
// on the plane and runs its Deployment's replica from the binary
// hack/ensure-tools.sh capi-test-extension builds.
func runTestExtension(ctx context.Context, proxy framework.ClusterProxy) error {
	version, err := capxp.RequiredVersion("sigs.k8s.io/cluster-api")
	if err != nil {
		return err
	}
	bin, err := tools.Dir(envtest.ToolsDir()).Binary("capi-test-extension", version)
	if err != nil {
		return err
	}
	manifest, err := os.ReadFile(filepath.Join("data", "test-extension.yaml"))
	if err != nil {
		return err
	}
	if err := proxy.CreateOrUpdate(ctx, manifest); err != nil {
		return fmt.Errorf("cannot install the test extension: %w", err)
	}
	return p.RunDeploymentBeside(ctx, testExtensionNamespace, testExtensionName, bin)
}

// CAPI's controllers call the test extension only on the plane of CAPI's
// binaries (the in-process ones have no Runtime SDK client), so the spec
// runs with the in-place specs, on their plane.
var _ = ginkgo.Describe("When upgrading a workload cluster using ClusterClass with RuntimeSDK [e2e-upgrades-runtimesdk]", ginkgo.Label("runtime-sdk"), func() {
	capie2e.ClusterUpgradeWithRuntimeSDKSpec(ctx, func() capie2e.ClusterUpgradeWithRuntimeSDKSpecInput {
		return capie2e.ClusterUpgradeWithRuntimeSDKSpecInput{
			E2EConfig:                 e2eConfig,
			ClusterctlConfigPath:      clusterctlConfigPath,
			BootstrapClusterProxy:     bootstrapClusterProxy,
			ArtifactFolder:            artifactFolder,
			SkipCleanup:               *skipCleanup,
			InfrastructureProvider:    ptr.To("crossplane"),
			Flavor:                    ptr.To("e2e-upgrades-runtimesdk"),
			ExtensionServiceNamespace: testExtensionNamespace,
			ExtensionServiceName:      testExtensionService,
		}
	})
})

func TestRuntimeSDKClass(t *testing.T) {
	release, err := os.ReadFile(filepath.Join("..", "..", "packages", "clusterctl", "clusterclass-crossplane-local.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	made, err := runtimeSDKClass(release)
	if err != nil {
		t.Fatal(err)
	}
	objects := classObjects(t, made)
	class := objects["ClusterClass/crossplane-local-runtimesdk"]
	if class == nil {
		t.Fatalf("no ClusterClass crossplane-local-runtimesdk among %v", slices.Sorted(maps.Keys(objects)))
	}
	patches, _, _ := unstructured.NestedSlice(class.Object, "spec", "patches")
	have, _, _ := unstructured.NestedSlice(classObjects(t, release)["ClusterClass/crossplane-local"].Object, "spec", "patches")
	releasePatches := len(have)
	cases := map[string]struct {
		got, want any
	}{
		"the release's patches are kept, the extension's added": {len(patches), releasePatches + 1},
		"the control plane's template is the class's own":       {must(unstructured.NestedString(class.Object, "spec", "controlPlane", "templateRef", "name")), "crossplane-local-runtimesdk-control-plane"},
		"the external patches name the spec's ExtensionConfig": {
			must(unstructured.NestedString(patches[len(patches)-1].(map[string]any), "external", "generatePatchesExtension")),
			"generate-patches.${EXTENSION_CONFIG_NAME:-k8s-upgrade-with-runtimesdk}"},
		"so does its variables' discovery": {
			must(unstructured.NestedString(patches[len(patches)-1].(map[string]any), "external", "discoverVariablesExtension")),
			"discover-variables.${EXTENSION_CONFIG_NAME:-k8s-upgrade-with-runtimesdk}"},
		"the workers' machine template is the class's own": {objects["CrossplaneMachineTemplate/crossplane-local-runtimesdk-worker"] != nil, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if fmt.Sprint(tc.got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

// must is a field read from a test's own object, whose absence the
// comparison reports.
func must(s string, _ bool, _ error) string { return s }
