package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/capxp/cluster-api-provider-crossplane/internal/describe"
)

// Annotate writes what the plan says onto a cluster's tree as `capxp
// describe` draws it: each Machine's verdict and why, each owner's scale,
// each XR's hold or count of changes, each composed resource's action and
// fields, and a row for each resource Crossplane will create. It returns
// the XRs of the plan it found in the tree.
func (p *Plan) Annotate(root *describe.Node) map[*XR]bool {
	placed := map[*XR]bool{}
	var cluster *Cluster
	for i := range p.Clusters {
		if c := &p.Clusters[i]; c.Namespace == root.Namespace && c.Name == root.Name {
			cluster = c
		}
	}
	var visit func(n *describe.Node)
	visit = func(n *describe.Node) {
		if cluster != nil && n.Plan == "" {
			n.Plan = cluster.planOf(n)
		}
		if x := p.xrOf(n); x != nil {
			placed[x] = true
			x.annotate(n)
		}
		for _, c := range n.Children {
			visit(c)
		}
	}
	visit(root)
	return placed
}

// planOf is what the cluster's prediction says of a Machine or of an owner
// that scales.
func (c *Cluster) planOf(n *describe.Node) string {
	switch n.Kind {
	case "Machine":
		for _, m := range c.Machines {
			if m.Name == n.Name {
				return strings.Join(append([]string{string(m.Verdict)}, m.Reasons...), ": ")
			}
		}
	case "MachineDeployment", "KubeadmControlPlane":
		for _, s := range c.Scales {
			if s.Owner == n.Kind+"/"+n.Name {
				return fmt.Sprintf("scales %d → %d", s.From, s.To)
			}
		}
	}
	return ""
}

// xrOf is the plan's XR a node is, if any.
func (p *Plan) xrOf(n *describe.Node) *XR {
	for i := range p.XRs {
		if x := &p.XRs[i]; x.Kind == n.Kind && x.Namespace == n.Namespace && x.Name == n.Name {
			return x
		}
	}
	return nil
}

// Summary says how many of the XR's composed resources change.
func (x *XR) Summary() string {
	if len(x.Changes) == 1 {
		return "1 composed resource changes"
	}
	return fmt.Sprintf("%d composed resources change", len(x.Changes))
}

// Actions are an XR's composed resources by what the change does to them:
// those created and deleted, sorted, and the fields of those changed.
func (x *XR) Actions() (created, deleted []string, changed map[string][]string) {
	changed = map[string][]string{}
	for _, ch := range x.Changes {
		switch ch.Action {
		case Created:
			created = append(created, ch.Resource)
		case Deleted:
			deleted = append(deleted, ch.Resource)
		case Changed:
			changed[ch.Resource] = ch.Fields
		}
	}
	slices.Sort(created)
	slices.Sort(deleted)
	return created, deleted, changed
}

// annotate writes an XR's prediction onto its node and its composed
// resources' nodes, and adds a node for each resource it will create.
func (x *XR) annotate(n *describe.Node) {
	switch {
	case x.Held != "":
		n.Plan = "held: " + x.Held
	case len(x.Changes) > 0:
		n.Plan = x.Summary()
	case len(x.Unknown) > 0:
		n.Plan = "not predicted: " + strings.Join(x.Unknown, "; ")
	}
	for _, ch := range x.Changes {
		plan := ch.Action
		if len(ch.Fields) > 0 {
			plan += ": " + strings.Join(ch.Fields, ", ")
		}
		if ch.Refused != "" {
			plan += " (refused: " + ch.Refused + ")"
		}
		found := false
		for _, c := range n.Children {
			if c.Role == "Composed" && c.Kind == ch.Kind && ch.Name != "" && c.Name == ch.Name {
				c.Plan, found = plan, true
			}
		}
		if !found {
			name := ch.Name
			if name == "" {
				name = ch.Resource
			}
			n.Children = append(n.Children, &describe.Node{Role: "Composed", Kind: ch.Kind, Namespace: x.Namespace, Name: name, Plan: plan})
		}
	}
}
