// Package chaos runs CAPXP under faults on the real local management plane
// (dev/plane): the manager killed outright again and again, replicas
// that lose their leader, and components that go away. Each test counts what
// a user would count after the faults, in the management and the workload
// API servers: clusters converged, composed resources neither orphaned nor
// duplicated, deletions finished, conditions that said why.
//
// `make test-chaos` runs it; the seed of its random points is printed and
// -chaos-seed replays them.
package chaos

import (
	"flag"
	"os"
	"testing"

	"github.com/capxp/cluster-api-provider-crossplane/dev/lifeline"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/test/planesuite"
)

var (
	p    *plane.Plane
	bin  string
	seed = flag.Int64("chaos-seed", 0, "seed of the random points faults strike at; 0 picks one (printed)")
)

func TestMain(m *testing.M) {
	// The plane starts etcd and kube-apiserver through links to this test
	// binary, so that they die with it.
	lifeline.Main()
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The replicas test reads who wrote what.
	return planesuite.Run(m, "chaos", []string{"./cmd/capxp"}, plane.Options{AuditManagement: true}, func(s planesuite.Suite) {
		p, bin = s.Plane, s.Bin
	})
}
