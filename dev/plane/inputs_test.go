package plane

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
		"etcd, kube-apiserver, kube-controller-manager, kube-scheduler",
		"crds/cluster-api-v", "crds/crossplane-v",
		"crossplane-v", "provider-kubernetes-v", "function-patch-and-transform-v", "function-auto-ready-v",
		"package/crossplane.yaml",
		"hack/ensure-tools.sh etcd kube-apiserver kube-controller-manager kube-scheduler crds provider-kubernetes kwok crossplane function-patch-and-transform function-auto-ready`",
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
	// Each example starts with its namespace, which the plane creates first,
	// keeps everything else in it, and has the Machines the plane waits for
	// (a MachineDeployment's replicas count, and a Cluster topology's
	// control plane and worker replicas).
	for _, e := range Examples {
		objs, err := readManifests(e.File)
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) == 0 || objs[0].GetKind() != "Namespace" || objs[0].GetName() != e.Namespace() {
			t.Errorf("%s does not start with Namespace %s, which the plane creates first", e.File, e.Namespace())
		}
		machines := 0
		for _, o := range objs[1:] {
			if o.GetNamespace() != e.Namespace() {
				t.Errorf("%s: %s %s is in namespace %q, want %s", e.File, o.GetKind(), o.GetName(), o.GetNamespace(), e.Namespace())
			}
			switch o.GetKind() {
			case "Machine":
				machines++
			case "MachineDeployment", "KubeadmControlPlane":
				machines += count(o.Object, "spec", "replicas")
			case "Cluster":
				machines += count(o.Object, "spec", "topology", "controlPlane", "replicas")
				mds, _, _ := unstructured.NestedSlice(o.Object, "spec", "topology", "workers", "machineDeployments")
				for _, md := range mds {
					machines += count(md.(map[string]any), "replicas")
				}
			}
		}
		if machines != e.Machines {
			t.Errorf("%s has %d Machines, the plane waits for %d", e.File, machines, e.Machines)
		}
	}
}

// count reads a replica count of a decoded manifest; 0 when absent.
func count(obj map[string]any, path ...string) int {
	switch n, _, _ := unstructured.NestedFieldNoCopy(obj, path...); n := n.(type) {
	case int64:
		return int(n)
	case float64:
		return int(n)
	}
	return 0
}
