// Package envtest starts a real kube-apiserver and etcd for integration tests
// (through internal/localkube, which the local plane uses too) and loads
// everything CAPXP runs against: CAPI's CRDs and Crossplane's CRDs (read from
// their Go modules), CAPXP's template CRDs, and CAPXP's XRDs turned into CRDs
// with crossplane-runtime's xcrd, exactly as Crossplane does. CAPI's
// controllers run in-process (localkube's StartCAPI); the real Crossplane can
// be run against the API server with internal/plane's StartCrossplane.
//
// The binaries come from hack/ensure-tools.sh (`make tools`), which builds
// them from the Go module proxy into .cache/tools; KUBEBUILDER_ASSETS, when
// set, overrides that location.
package envtest
