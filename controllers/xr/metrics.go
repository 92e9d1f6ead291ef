package xr

// The bridge's metrics, served with controller-runtime's on the manager's
// secured metrics endpoint. Reconcile durations per kind are
// controller-runtime's own (controller_runtime_reconcile_time_seconds, one
// controller per adapted kind: capxp-<kind>.<group>).

import (
	"slices"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// labelKind is the XR kind label of the bridge's series.
const labelKind = "kind"

// Targets of the bridge's writes (capxp_writes_total's target label).
const (
	targetXR             = "xr"
	targetXRStatus       = "xr_status"
	targetOwnerCondition = "owner_condition"
	targetKubeconfig     = "kubeconfig"
)

var (
	readyToProvisioned = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "capxp_xr_ready_to_provisioned_seconds",
		Help: "Seconds from Crossplane reporting an XR Ready to the bridge writing it provisioned for CAPI, by XR kind.",
		// From the bridge's own latency (tens of milliseconds) to a
		// backlog of minutes.
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
	}, []string{labelKind})

	writes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capxp_writes_total",
		Help: "Writes the bridge sent, by target (xr: an XR's metadata and spec; xr_status: its contract status; owner_condition: the CAPI owner's CrossplaneInfrastructureReady) and XR kind.",
	}, []string{"target", labelKind})

	verdicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capxp_verdicts_total",
		Help: "Verdicts the bridge wrote to a CAPI owner's CrossplaneInfrastructureReady condition as they changed, by reason and XR kind.",
	}, []string{"reason", labelKind})

	credentialsRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capxp_credentials_refusals_total",
		Help: "Refusals of the credentials an XR names (held, composing nothing), counted once per XR and reason, by namespace and reason.",
	}, []string{"namespace", "reason"})
)

func init() {
	metrics.Registry.MustRegister(readyToProvisioned, writes, verdicts, credentialsRefusals, wakeups)
}

// observeProvisioned records the time from an XR's Ready to its
// provisioned write.
func observeProvisioned(kind string, readySince, now time.Time) {
	if readySince.IsZero() || now.Before(readySince) {
		return
	}
	readyToProvisioned.WithLabelValues(kind).Observe(now.Sub(readySince).Seconds())
}

// countWaiting counts the XR in capxp_xrs_waiting while CAPI waits for it
// (waits).
func (r *xrReconciler) countWaiting(s *scope) {
	u := s.before
	provisioned := isProvisioned(u) || s.status != nil || s.recalled.provisioned
	r.waiting.set(u.GetUID(), waitingXR{kind: u.GetKind(), namespace: u.GetNamespace(), since: u.GetCreationTimestamp().Time}, waits(u, provisioned, s.paused))
}

// waits reports whether CAPI waits for the XR: it belongs to a cluster (a
// CAPI object owns it, or it carries CAPI's cluster-name label, as what CAPI
// clones from a template does before it sets itself owner; a tenant's XR
// outside any cluster waits for nobody), and it is not provisioned, paused
// by CAPI, externally managed or deleting.
func waits(u *unstructured.Unstructured, provisioned, paused bool) bool {
	_, labelled := u.GetLabels()[clusterv1.ClusterNameLabel]
	owned := slices.ContainsFunc(u.GetOwnerReferences(), func(o metav1.OwnerReference) bool {
		gv, err := schema.ParseGroupVersion(o.APIVersion)
		return err == nil && gv.Group == clusterv1.GroupVersion.Group
	})
	return (labelled || owned) && !provisioned && !paused && u.GetDeletionTimestamp().IsZero() && !annotations.IsExternallyManaged(u)
}

// waitingXRs keeps, for the XRs a CAPI owner waits on, when each was
// created; a scrape reports them by kind and namespace, with the age of the
// oldest (capxp_xrs_waiting, capxp_xr_waiting_oldest_seconds): an XR that
// waits too long is what an operator is paged for. Deliberate waits are
// not counted: paused, externally managed and deleting XRs.
type waitingXRs struct {
	mu  sync.Mutex
	xrs map[types.UID]waitingXR
	now func() time.Time

	count, oldest *prometheus.Desc
}

type waitingXR struct {
	kind, namespace string
	since           time.Time
}

// newWaitingXRs returns an empty set, read at now. Its lifetime is its
// Controllers' (the manager's): registerWaiting exports it.
func newWaitingXRs(now func() time.Time) *waitingXRs {
	return &waitingXRs{
		xrs: map[types.UID]waitingXR{},
		now: now,
		count: prometheus.NewDesc("capxp_xrs_waiting",
			"XRs whose CAPI owner waits for them to be provisioned (neither paused, externally managed nor deleting), by XR kind and namespace.",
			[]string{labelKind, "namespace"}, nil),
		oldest: prometheus.NewDesc("capxp_xr_waiting_oldest_seconds",
			"Age of the oldest XR counted in capxp_xrs_waiting, by XR kind and namespace.",
			[]string{labelKind, "namespace"}, nil),
	}
}

// registerWaiting exports w on controller-runtime's registry in place of
// the set of an earlier manager of this process (tests run several, one
// after another; a binary runs one).
func registerWaiting(w *waitingXRs) error {
	metrics.Registry.Unregister(w)
	return errors.Wrap(metrics.Registry.Register(w), "cannot register capxp_xrs_waiting")
}

// set records whether an XR waits to be provisioned.
func (w *waitingXRs) set(uid types.UID, x waitingXR, waits bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if waits {
		w.xrs[uid] = x
		return
	}
	delete(w.xrs, uid)
}

// forgetKind drops the XRs of a kind the bridge no longer adapts.
func (w *waitingXRs) forgetKind(kind string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for uid, x := range w.xrs {
		if x.kind == kind {
			delete(w.xrs, uid)
		}
	}
}

// Describe implements prometheus.Collector.
func (w *waitingXRs) Describe(ch chan<- *prometheus.Desc) {
	ch <- w.count
	ch <- w.oldest
}

// Collect implements prometheus.Collector.
func (w *waitingXRs) Collect(ch chan<- prometheus.Metric) {
	type key struct{ kind, namespace string }
	type agg struct {
		n      int
		oldest time.Time
	}
	w.mu.Lock()
	by := map[key]*agg{}
	for _, x := range w.xrs {
		k := key{x.kind, x.namespace}
		a, ok := by[k]
		if !ok {
			a = &agg{oldest: x.since}
			by[k] = a
		}
		a.n++
		if x.since.Before(a.oldest) {
			a.oldest = x.since
		}
	}
	now := w.now()
	w.mu.Unlock()
	for k, a := range by {
		ch <- prometheus.MustNewConstMetric(w.count, prometheus.GaugeValue, float64(a.n), k.kind, k.namespace)
		ch <- prometheus.MustNewConstMetric(w.oldest, prometheus.GaugeValue, max(0, now.Sub(a.oldest).Seconds()), k.kind, k.namespace)
	}
}
