package bench

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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
	const ticksPerSecond = 100 // USER_HZ on Linux
	parent := strconv.Itoa(os.Getpid())
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		comm := s[open+1 : end]
		f := strings.Fields(s[end+1:])
		// After the command: state, ppid, ... utime is field 14 and stime
		// field 15 of the whole line, 12 and 13 here.
		if len(f) < 13 || f[1] != parent || !contains(names, comm) {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return time.Duration(ticks) * time.Second / ticksPerSecond
}

func contains(names []string, s string) bool {
	for _, n := range names {
		if n == s {
			return true
		}
	}
	return false
}
