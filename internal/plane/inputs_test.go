package plane

import (
	"strings"
	"testing"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
)

func TestCheckSaysEverythingMissing(t *testing.T) {
	dir := t.TempDir()
	err := Check(Options{Tools: tools.Dir(dir), ManagerBinary: dir + "/capxp"})
	if err == nil {
		t.Fatal("an empty tools directory passed the check")
	}
	msg := err.Error()
	for _, want := range []string{
		"etcd, kube-apiserver, kube-controller-manager",
		"crds/cluster-api-v", "crds/crossplane-v",
		"crossplane-v", "provider-kubernetes-v", "function-patch-and-transform-v", "function-auto-ready-v",
		"package/crossplane.yaml",
		"hack/ensure-tools.sh etcd kube-apiserver kube-controller-manager crds provider-kubernetes crossplane function-patch-and-transform function-auto-ready`",
		"--tools-dir",
		"the capxp binary " + dir + "/capxp",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the check's error does not mention %q:\n%s", want, msg)
		}
	}
	if n := strings.Count(msg, "hack/ensure-tools.sh"); n != 1 {
		t.Errorf("the check's error names hack/ensure-tools.sh %d times, want once:\n%s", n, msg)
	}
}

func TestEmbeddedManifests(t *testing.T) {
	crds, err := ownCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) == 0 {
		t.Errorf("no CRDs embedded from %s", capxp.CRDsDir)
	}
	for _, c := range crds {
		if c.Kind != "CustomResourceDefinition" || c.Name == "" {
			t.Errorf("%s %q is not a named CRD", c.Kind, c.Name)
		}
	}
	objs, err := readManifests(capxp.LocalExample)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 || objs[0].GetKind() != "Namespace" || objs[0].GetName() != ExampleNamespace {
		t.Errorf("%s does not start with Namespace %s, which ApplyExample creates first", capxp.LocalExample, ExampleNamespace)
	}
}
