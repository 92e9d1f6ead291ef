package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/caching"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
)

// watcherEnv makes the benchmark's binary a watcher (runWatcher) instead of
// running tests: its value is the kubeconfig to watch with.
const watcherEnv = "CAPXP_BENCH_WATCHER_KUBECONFIG"

// watcherReady is the line a watcher prints once its caches have synced.
const watcherReady = "watcher synced"

// runWatcher takes in what the bridge takes in, and does nothing with it:
// the bridge's own cache (caching.New with the manager's options)
// informed of the kinds that change as a fleet provisions (Machines,
// Clusters, and the machine and cluster XRs, unstructured as the bridge
// reads them), with no controller. Its CPU is what watching costs any
// controller that must see every update Crossplane makes to an XR: the floor
// under the bridge's. It runs until it is signalled or its stdin closes.
func runWatcher(kubeconfig string) error {
	// Its informers log through controller-runtime's logger, which would
	// otherwise print a stack to say it was never set.
	ctrl.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return errors.Wrap(err, "cannot read the kubeconfig")
	}
	o := caching.Options("", 10*time.Hour)
	o.Scheme = controllers.NewScheme()
	c, err := caching.New(cfg, o)
	if err != nil {
		return err
	}
	var objs []client.Object
	objs = append(objs, &clusterv1.Machine{}, &clusterv1.Cluster{})
	for _, kind := range []string{"CrossplaneMachine", "CrossplaneCluster"} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(infrav1.GroupVersion.WithKind(kind))
		objs = append(objs, u)
	}
	for _, obj := range objs {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return errors.Wrapf(err, "cannot watch %T", obj)
		}
		// A handler, as a controller's watch adds one: the informer hands
		// every event on.
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{}); err != nil {
			return err
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return errors.New("the watcher's caches did not sync")
	}
	fmt.Println(watcherReady)
	// Each line on stdin asks for the live heap after a collection, as the
	// benchmark reads the manager's; stdin's end stops the watcher.
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			fmt.Println(liveHeapOfThisProcess())
		}
		stop()
	}()
	<-ctx.Done()
	return nil
}

// liveHeapOfThisProcess collects garbage and reads the live heap after it
// (runtime/metrics /gc/heap/live:bytes, the figure controller-runtime
// exports as go_gc_heap_live_bytes and the benchmark reads of the manager).
func liveHeapOfThisProcess() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// watcher is a runWatcher process.
type watcher struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
}

// startWatcher starts this binary as a watcher of the plane and waits until
// its caches have synced.
func startWatcher(ctx context.Context, kubeconfig string) (*watcher, error) {
	cmd := exec.CommandContext(ctx, os.Args[0]) //nolint:gosec // this very binary.
	cmd.Env = append(os.Environ(), watcherEnv+"="+kubeconfig)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, errors.Wrap(err, "cannot start the watcher")
	}
	w := &watcher{cmd: cmd, stdin: stdin, stdout: bufio.NewReader(stdout)}
	line, err := w.stdout.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != watcherReady {
		w.stop()
		return nil, errors.Errorf("the watcher did not sync: %q, %v", line, err)
	}
	return w, nil
}

// cpu is the CPU time the watcher used so far; none without a watcher.
func (w *watcher) cpu() (time.Duration, error) {
	if w == nil {
		return 0, nil
	}
	st, err := plane.ReadProcessStat(w.cmd.Process.Pid)
	return st.CPU, err
}

// heap is the watcher's live heap after a collection, in bytes; 0 without a
// watcher.
func (w *watcher) heap() (int64, error) {
	if w == nil {
		return 0, nil
	}
	if _, err := fmt.Fprintln(w.stdin, "heap"); err != nil {
		return 0, errors.Wrap(err, "cannot ask the watcher for its heap")
	}
	line, err := w.stdout.ReadString('\n')
	if err != nil {
		return 0, errors.Wrap(err, "cannot read the watcher's heap")
	}
	return strconv.ParseInt(strings.TrimSpace(line), 10, 64)
}

func (w *watcher) stop() {
	_ = w.stdin.Close()
	_ = w.cmd.Wait()
}
