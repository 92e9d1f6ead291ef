package xrd

import (
	"io/fs"
	"path"
	"testing"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
)

// TestOwnCRDLabels checks that the labels the manager restores are those the
// shipped CRDs carry, for every shipped CRD and no other.
func TestOwnCRDLabels(t *testing.T) {
	files, err := fs.Glob(capxp.Manifests, path.Join(capxp.CRDsDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := OwnCRDLabels()
	seen := map[string]bool{}
	for _, f := range files {
		raw, err := fs.ReadFile(capxp.Manifests, f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &extv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			t.Fatal(err)
		}
		seen[crd.Name] = true
		restores, ok := want[crd.Name]
		if !ok {
			t.Errorf("shipped CRD %s: OwnCRDLabels does not restore its labels", crd.Name)
			continue
		}
		if !labels.SelectorFromSet(restores).Matches(labels.Set(crd.Labels)) {
			t.Errorf("shipped CRD %s carries %v, but OwnCRDLabels restores %v", crd.Name, crd.Labels, restores)
		}
	}
	for n := range want {
		if !seen[n] {
			t.Errorf("OwnCRDLabels names %s, which is not a shipped CRD", n)
		}
	}
}
