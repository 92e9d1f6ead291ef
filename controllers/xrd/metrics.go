package xrd

import (
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

// setState records an XRD's state in capxp_xrd_adaptation, its one series.
// The state an XRD had is not remembered: every series of the XRD goes
// first (a reconcile of one XRD runs alone).
func setState(xrd, state string) {
	xrdStates.DeletePartialMatch(prometheus.Labels{"xrd": xrd})
	xrdStates.WithLabelValues(xrd, state).Set(1)
}

// forgetState drops an XRD that is gone or no longer declares a contract.
func forgetState(xrd string) {
	xrdStates.DeletePartialMatch(prometheus.Labels{"xrd": xrd})
}
