package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/capxp/cluster-api-provider-crossplane/internal/describe"
)

// TestAnnotate writes plans onto a cluster's tree as capxp describe draws
// it, and reads back the PLAN of each row.
func TestAnnotate(t *testing.T) {
	tree := func() *describe.Node {
		composed := &describe.Node{Role: "Composed", Kind: "Object", Namespace: ns, Name: "alpha-net"}
		machineXR := &describe.Node{Role: "MachineInfrastructure", Kind: "CrossplaneMachine", Namespace: ns, Name: "workers-1"}
		return &describe.Node{Kind: "Cluster", Namespace: ns, Name: "alpha", Children: []*describe.Node{
			{Role: "ClusterInfrastructure", Kind: "CrossplaneCluster", Namespace: ns, Name: "alpha", Children: []*describe.Node{composed}},
			{Role: "Workers", Kind: "Workers", Name: "Workers", Children: []*describe.Node{
				{Kind: "MachineDeployment", Namespace: ns, Name: "workers", Children: []*describe.Node{
					{Kind: "Machine", Namespace: ns, Name: "workers-1", Children: []*describe.Node{machineXR}},
					{Kind: "Machine", Namespace: ns, Name: "workers-2"},
				}},
			}},
		}}
	}
	// rows are the tree's rows with a plan, "Kind name: plan".
	rows := func(n *describe.Node) []string {
		var out []string
		var walk func(*describe.Node)
		walk = func(n *describe.Node) {
			if n.Plan != "" {
				out = append(out, n.Kind+" "+n.Name+": "+n.Plan)
			}
			for _, c := range n.Children {
				walk(c)
			}
		}
		walk(n)
		return out
	}
	cases := map[string]struct {
		reason     string
		plan       Plan
		wantRows   []string
		wantPlaced int
	}{
		"RolloutAndScale": {
			reason: "a replaced Machine says why, a kept one says so, the owner its scale",
			plan: Plan{Clusters: []Cluster{{Namespace: ns, Name: "alpha",
				Machines: []Machine{{Name: "workers-1", Verdict: Replaced, Reasons: []string{"Version v1.36.5, v1.37.0 required"}}, {Name: "workers-2", Verdict: Kept}},
				Scales:   []Scale{{Owner: "MachineDeployment/workers", From: 2, To: 3}}}}},
			wantRows: []string{"MachineDeployment workers: scales 2 → 3", "Machine workers-1: Replaced: Version v1.36.5, v1.37.0 required", "Machine workers-2: Kept"},
		},
		"ComposedChanges": {
			reason: "an XR counts its changes, a composed resource says its fields, one to be created gets a row",
			plan: Plan{XRs: []XR{{Kind: "CrossplaneCluster", Namespace: ns, Name: "alpha", Changes: []ComposedChange{
				{Resource: "network", Kind: "Object", Name: "alpha-net", Action: Changed, Fields: []string{"metadata.labels.tier"}},
				{Resource: "firewall", Kind: "Object", Action: Created, Refused: "namespace team-a may not use ProviderConfig other"},
			}}}},
			wantRows: []string{"CrossplaneCluster alpha: 2 composed resources change", "Object alpha-net: changed: metadata.labels.tier",
				"Object firewall: created (refused: namespace team-a may not use ProviderConfig other)"},
			wantPlaced: 1,
		},
		"ReplacedMachinesXR": {
			reason: "a replaced Machine's XR says what goes with it, below the Machine's verdict",
			plan: Plan{
				Clusters: []Cluster{{Namespace: ns, Name: "alpha", Machines: []Machine{{Name: "workers-1", Verdict: Replaced}}}},
				XRs: []XR{{Kind: "CrossplaneCluster", Namespace: ns, Name: "alpha", Changes: []ComposedChange{
					{Resource: "network", Kind: "Object", Name: "alpha-net", Action: Deleted},
				}}},
			},
			wantRows:   []string{"CrossplaneCluster alpha: 1 composed resource changes", "Object alpha-net: deleted", "Machine workers-1: Replaced"},
			wantPlaced: 1,
		},
		"Held": {
			reason:     "a held XR says why",
			plan:       Plan{XRs: []XR{{Kind: "CrossplaneMachine", Namespace: ns, Name: "workers-1", Held: "namespace team-a may not use ClusterProviderConfig shared"}}},
			wantRows:   []string{"CrossplaneMachine workers-1: held: namespace team-a may not use ClusterProviderConfig shared"},
			wantPlaced: 1,
		},
		"ElsewhereIsNotPlaced": {
			reason: "an XR outside the tree is not placed in it",
			plan:   Plan{XRs: []XR{{Kind: "CrossplaneCluster", Namespace: "other", Name: "alpha", Held: "not here"}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := tree()
			placed := tc.plan.Annotate(n)
			if diff := cmp.Diff(tc.wantRows, rows(n)); diff != "" {
				t.Errorf("%s: -want +got:\n%s", tc.reason, diff)
			}
			if len(placed) != tc.wantPlaced {
				t.Errorf("%s: %d XRs placed, want %d", tc.reason, len(placed), tc.wantPlaced)
			}
		})
	}
}
