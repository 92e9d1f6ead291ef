// Package integration holds CAPXP's cross-component integration tests. They
// run against a real kube-apiserver and etcd (test/envtest) with CAPI's CRDs,
// Crossplane's CRDs and CAPXP's XRDs installed, and CAPI's own reconcilers
// running in-process.
package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
)

var (
	env *envtest.Environment
	ctx context.Context
)

// timeout bounds every wait. Generous: a passing test never waits it out,
// and a loaded 2-core machine (CI, or tests beside a build) is slow.
const (
	timeout  = 60 * time.Second
	interval = 100 * time.Millisecond
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Controller logs are noise in a passing run; CAPXP_TEST_LOGS=1 shows them.
	if v := os.Getenv("CAPXP_TEST_LOGS"); v != "" {
		// CAPXP_TEST_LOGS=4 shows the chatty lines too.
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("v", v)
		ctrl.SetLogger(klog.Background())
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	var cancel context.CancelFunc
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()

	var err error
	env, err = envtest.Start(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot start the test API server:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "cannot stop the test API server:", err)
		}
	}()
	return m.Run()
}

// namespace creates a fresh namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ns, err := env.NewNamespace(ctx, "capxp-test")
	g.Expect(err).NotTo(HaveOccurred())
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
