package e2e

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/capxp/cluster-api-provider-crossplane/test/writers"
)

// watchWriters records, for the rest of the test, who updated each
// CrossplaneCluster and CrossplaneMachine of namespace ns and when, so that
// a watch circuit Crossplane opened on an XR names the writers whose updates
// filled it (Crossplane's breaker charges an XR every update of it).
func watchWriters(t *testing.T, ns string) *writers.Log {
	t.Helper()
	l := &writers.Log{}
	watchXRs(t, ns, cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(o, n any) {
			old, ok1 := o.(*unstructured.Unstructured)
			updated, ok2 := n.(*unstructured.Unstructured)
			if !ok1 || !ok2 || old.GetResourceVersion() == updated.GetResourceVersion() {
				return
			}
			l.Record(updated.GetUID(), time.Now(), old.GetManagedFields(), updated.GetManagedFields())
		},
	}, "crossplaneclusters", "crossplanemachines")
	return l
}
