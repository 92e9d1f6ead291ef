// Package integration holds CAPXP's cross-component integration tests. They
// run against a real kube-apiserver and etcd (test/envtest), the real
// Crossplane core and function-patch-and-transform (as local processes, one
// for the package), CAPI's own reconcilers in-process, and CAPXP's XRDs
// composed by a test Composition whose managed resources a test provider
// observes (test/envtest's Composition and Provider): only the cloud is
// scripted.
package integration

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capxp/cluster-api-provider-crossplane/dev/lifeline"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

var (
	env *envtest.Environment
	ctx context.Context
	// logDir keeps Crossplane's logs, and the bridge's of failed tests.
	logDir string
)

// timeout bounds every wait. Generous: a passing test never waits it out,
// and a loaded 2-core machine (CI, or tests beside a build) is slow.
const (
	timeout  = 60 * time.Second
	interval = 100 * time.Millisecond
)

func TestMain(m *testing.M) {
	// etcd and kube-apiserver start through links to this test binary, so
	// that they die with it however it ends.
	lifeline.Main()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Controller logs are noise in a passing run; CAPXP_TEST_LOGS=1 shows
	// them, CAPXP_TEST_LOGS=4 the chatty lines too.
	envtest.ControllerLogs("CAPXP_TEST_LOGS")
	var cancel context.CancelFunc
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()

	// Crossplane's and the functions' logs stay here when a test fails,
	// and the bridge's of each failed test (stackWith).
	dir, err := os.MkdirTemp("", "capxp-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot create a directory for Crossplane:", err)
		return 1
	}
	logDir = dir
	env, err = envtest.StartWithCrossplane(ctx, dir, providerDelay)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot start the test API server and Crossplane:", err)
		fmt.Fprintln(os.Stderr, "Crossplane's logs are in", dir)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "cannot stop the test API server:", err)
		}
	}()
	code := m.Run()
	if err := env.CrossplaneRunning(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code != 0 {
		fmt.Fprintln(os.Stderr, "Crossplane's logs, and the bridge's of each failed test, are in", dir)
		return code
	}
	_ = os.RemoveAll(dir)
	return 0
}

// providerDelay is how long the test provider takes to observe a composed
// resource: long enough that XRs are seen composing before they are ready.
const providerDelay = 300 * time.Millisecond

// namespace creates a fresh namespace for one test. When the test ends,
// every XR left in it must still be responsive to Crossplane: the bridge
// never floods Crossplane with watch events.
func namespace(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ns, err := env.NewNamespace(ctx, "capxp-test")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		for _, gvk := range []schema.GroupVersionKind{clusterGVK, machineGVK} {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			g.Expect(env.Client.List(ctx, l, client.InNamespace(ns))).To(Succeed())
			for i := range l.Items {
				responsive(g, &l.Items[i])
			}
		}
	})
	return ns
}

// change gets obj afresh, applies mutate and sends the difference as a merge
// patch, as kubectl edit does: controllers write the same objects
// concurrently, and a whole-object update would lose to their writes.
func change(g Gomega, obj client.Object, mutate func()) {
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	before := obj.DeepCopyObject().(client.Object)
	mutate()
	g.Expect(env.Client.Patch(ctx, obj, client.MergeFrom(before))).To(Succeed())
}
