package readiness

import (
	"encoding/json"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

// Whatever Crossplane, a composition or a user left in an XR's status, the
// observation is ready, or it says why not with a known reason.
func FuzzObserve(f *testing.F) {
	f.Add([]byte(`{"metadata":{"generation":2},"status":{"conditions":[{"type":"Ready","status":"True","observedGeneration":2},{"type":"Synced","status":"True","observedGeneration":2}]}}`), int64(1), int64(2))
	f.Fuzz(func(t *testing.T, data []byte, from, to int64) {
		obj := map[string]any{}
		if err := json.Unmarshal(data, &obj); err != nil {
			return
		}
		xr := composite.New()
		xr.Object = obj
		o := Observe(xr, Mirror{From: from, To: to})
		switch {
		case o.Ready && (o.Reason != "" || o.Message != ""):
			t.Errorf("ready with a reason: %+v", o)
		case !o.Ready && o.Reason != infrav1.WaitingForCompositionReason && o.Reason != infrav1.CompositionFailedReason:
			t.Errorf("not ready with reason %q", o.Reason)
		case !o.Ready && o.Message == "":
			t.Errorf("not ready without a message: %+v", o)
		}
	})
}
