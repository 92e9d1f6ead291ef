package release

// The release this one upgrades from: its version, and the commit of this
// repository's history that is that release. The upgrade tests build it
// there with its own `make release`; `make verify` checks that no API
// version it served changed incompatibly since (internal/apicompat).
const (
	PreviousVersion = "v0.1.0"
	PreviousCommit  = "92acfcff747b8a64a2d2bdf1829fc76746a2f333"
)
