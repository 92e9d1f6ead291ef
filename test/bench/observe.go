package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
)

// latencies records, from a watch, when each Machine of a namespace was
// first seen and when it was first seen with its infrastructure
// provisioned.
type latencies struct {
	mu          sync.Mutex
	ns          string
	created     map[types.UID]time.Time
	provisioned map[types.UID]time.Time
}

func watchLatencies(ctx context.Context, c cache.Cache, ns string) (*latencies, error) {
	l := &latencies{ns: ns, created: map[types.UID]time.Time{}, provisioned: map[types.UID]time.Time{}}
	inf, err := c.GetInformer(ctx, &clusterv1.Machine{})
	if err != nil {
		return nil, err
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { l.see(o) },
		UpdateFunc: func(_, o any) { l.see(o) },
	})
	return l, err
}

func (l *latencies) see(o any) {
	m, ok := o.(*clusterv1.Machine)
	if !ok || m.Namespace != l.ns {
		return
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.created[m.UID]; !ok {
		l.created[m.UID] = now
	}
	if _, ok := l.provisioned[m.UID]; !ok && ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) {
		l.provisioned[m.UID] = now
	}
}

// quantiles returns the p50 and p99 of Machine created → infrastructure
// provisioned.
func (l *latencies) quantiles() (p50, p99 time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ds []time.Duration
	for uid, done := range l.provisioned {
		if start, ok := l.created[uid]; ok {
			ds = append(ds, done.Sub(start))
		}
	}
	if len(ds) == 0 {
		return 0, 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return at(0.50), at(0.99)
}

// childCPU is the CPU time (user and system) the child processes of this
// process with the given command names have used so far: the test
// environment's kube-apiserver and etcd.
func childCPU(names ...string) time.Duration {
	var sum time.Duration
	for name, cpu := range plane.ChildrenCPU(os.Getpid()) {
		if slices.Contains(names, name) {
			sum += cpu
		}
	}
	return sum
}

// selfCPU is the CPU time (user and system) this process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// profile keeps a CPU profile of this process while level runs, in
// $CAPXP_BENCH_PROFILE.<level>; it returns what stops it.
func profile(level string) (func(), error) {
	path := os.Getenv("CAPXP_BENCH_PROFILE")
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path + "." + level)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// apiServerProfile keeps a 90 s CPU profile of the API server, from the
// start of level's provisioning, in $CAPXP_BENCH_APISERVER_PROFILE.<level>;
// it returns what waits for it.
func apiServerProfile(ctx context.Context, cfg *rest.Config, level string) (func() error, error) {
	path := os.Getenv("CAPXP_BENCH_APISERVER_PROFILE")
	if path == "" {
		return func() error { return nil }, nil
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/debug/pprof/profile?seconds=90", nil)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() {
		resp, err := hc.Do(req)
		if err != nil {
			done <- err
			return
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			done <- fmt.Errorf("the API server's profile: %s", resp.Status)
			return
		}
		f, err := os.Create(path + "." + level)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		done <- errors.Join(err, f.Close())
	}()
	return func() error { return <-done }, nil
}
