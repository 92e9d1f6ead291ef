package capxp

import (
	"regexp"
	"testing"
)

func TestRequiredVersion(t *testing.T) {
	semver := regexp.MustCompile(`^v\d+\.\d+\.\d+`)
	for _, m := range []string{"sigs.k8s.io/cluster-api", "github.com/crossplane/crossplane/v2", "sigs.k8s.io/controller-runtime"} {
		v, err := RequiredVersion(m)
		if err != nil || !semver.MatchString(v) {
			t.Errorf("RequiredVersion(%q) = %q, %v; want a version", m, v, err)
		}
	}
	if v, err := RequiredVersion("sigs.k8s.io/cluster-api/api/core"); err == nil {
		t.Errorf("a module go.mod does not require has version %q", v)
	}
}

// The schema generated templates take spec.crossplane from is in the
// embedded machine template CRD.
func TestCrossplaneSchema(t *testing.T) {
	s, err := CrossplaneSchema()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"compositionRef", "compositionSelector", "compositionUpdatePolicy"} {
		if _, ok := s.Properties[f]; !ok {
			t.Errorf("the crossplane schema has no %s: %v", f, s.Properties)
		}
	}
}
