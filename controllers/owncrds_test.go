package controllers

import (
	"io/fs"
	"path"
	"testing"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
		labels, ok := want[crd.Name]
		if !ok {
			t.Errorf("shipped CRD %s: OwnCRDLabels does not restore its labels", crd.Name)
			continue
		}
		if !hasLabels(crd.Labels, labels) {
			t.Errorf("shipped CRD %s carries %v, but OwnCRDLabels restores %v", crd.Name, crd.Labels, labels)
		}
	}
	for n := range want {
		if !seen[n] {
			t.Errorf("OwnCRDLabels names %s, which is not a shipped CRD", n)
		}
	}
}

func TestHasLabels(t *testing.T) {
	cases := map[string]struct {
		have, want map[string]string
		ok         bool
	}{
		"AllThere":      {have: map[string]string{"a": "1", "b": "2"}, want: map[string]string{"a": "1"}, ok: true},
		"Missing":       {have: map[string]string{"b": "2"}, want: map[string]string{"a": "1"}},
		"OtherValue":    {have: map[string]string{"a": "2"}, want: map[string]string{"a": "1"}},
		"EmptyValue":    {have: map[string]string{"a": ""}, want: map[string]string{"a": ""}, ok: true},
		"NoLabelsAtAll": {want: map[string]string{"a": ""}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := hasLabels(tc.have, tc.want); got != tc.ok {
				t.Errorf("hasLabels(%v, %v) = %v, want %v", tc.have, tc.want, got, tc.ok)
			}
		})
	}
}
