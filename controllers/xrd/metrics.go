package xrd

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	xrdStates = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "capxp_xrd_adaptation",
		Help: "1 for each XRD that declares a CAPI contract, labelled with the reason of its CAPIContractAdapted condition (Adapted when the bridge adapts its kind).",
	}, []string{"xrd", "state"})
)

func init() {
	metrics.Registry.MustRegister(xrdStates)
}

// xrdStateGauge keeps capxp_xrd_adaptation: one series per XRD the bridge
// decided on, labelled with its state.
type xrdStateGauge struct {
	mu     sync.Mutex
	states map[string]string
}

var adaptation = &xrdStateGauge{states: map[string]string{}}

// set records an XRD's state.
func (g *xrdStateGauge) set(xrd, state string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if was, ok := g.states[xrd]; ok {
		if was == state {
			return
		}
		xrdStates.DeleteLabelValues(xrd, was)
	}
	g.states[xrd] = state
	xrdStates.WithLabelValues(xrd, state).Set(1)
}

// forget drops an XRD that is gone or no longer declares a contract.
func (g *xrdStateGauge) forget(xrd string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if was, ok := g.states[xrd]; ok {
		xrdStates.DeleteLabelValues(xrd, was)
		delete(g.states, xrd)
	}
}
