package xrd

import (
	"encoding/json"
	"strings"
	"testing"

	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
)

// Whatever an XRD holds, the check adapts it or says why not with a reason
// and errors that each name a field of the XRD.
func FuzzCheck(f *testing.F) {
	f.Add([]byte(`{"metadata":{"labels":{"capxp.dev/contract":"InfraMachine"}},"spec":{"group":"infrastructure.cluster.x-k8s.io","scope":"Namespaced","names":{"kind":"CrossplaneMachine","plural":"crossplanemachines"},"versions":[{"name":"v1alpha1","referenceable":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"providerID":{"type":"string"}}},"status":{"type":"object","properties":{"ready":{"type":"boolean"},"initialization":{"type":"object","properties":{"provisioned":{"type":"boolean"}}}}}}}}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		x := &xpextv2.CompositeResourceDefinition{}
		if err := json.Unmarshal(data, x); err != nil {
			return
		}
		a, p := Check(x)
		if (a == nil) == (p == nil) {
			t.Fatalf("want an adaptation or a problem, got %+v and %+v", a, p)
		}
		if a != nil {
			if a.GVK.Kind != x.Spec.Names.Kind || a.GVK.Group != x.Spec.Group || a.GVK.Version == "" {
				t.Errorf("adapted the wrong kind: %v", a.GVK)
			}
			return
		}
		if p.Reason == "" || len(p.Errors) == 0 {
			t.Fatalf("a problem without a reason or errors: %+v", p)
		}
		for _, e := range p.Errors {
			if !strings.HasPrefix(e.Field, "spec.") && !strings.HasPrefix(e.Field, "metadata.") {
				t.Errorf("an error names no field of the XRD: %q (%v)", e.Field, e)
			}
		}
		_ = p.Error()
	})
}
