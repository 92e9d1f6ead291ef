package bench

import (
	"context"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/capxp/cluster-api-provider-crossplane/internal/dev/plane"
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
