// Package envtest starts a real kube-apiserver and etcd for integration tests
// (through dev/localkube, which the local plane uses too) and loads
// everything CAPXP runs against: CAPI's CRDs and Crossplane's CRDs (read from
// their Go modules), CAPXP's template CRDs and CAPXP's XRDs. CAPI's
// controllers run in-process (localkube's StartCAPI).
//
// StartWithCrossplane also runs the real Crossplane core and composition
// functions (dev/plane's StartCrossplane), whose XRD controller makes the
// XRDs' CRDs, and a test provider (Provider) for the Stubs the test
// Composition (Composition) composes: only the cloud is scripted. Start runs
// no Crossplane and makes the CRDs with crossplane-runtime's xcrd, as
// Crossplane does, for tests of what Crossplane reads (rendered
// Compositions).
//
// The binaries come from hack/ensure-tools.sh (`make tools`), which builds
// them from the Go module proxy into .cache/tools; KUBEBUILDER_ASSETS, when
// set, overrides that location.
package envtest
