package describe

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// PrintOptions say how Print prints a tree.
type PrintOptions struct {
	// Color colours each status: green True, red False, yellow Unknown.
	Color bool
	// Now is what SINCE counts from; the time of the call when zero.
	Now time.Time
	// Plan adds a PLAN column after NAME: what a change will do to each
	// object.
	Plan bool
}

// ANSI colours of the same length, so that the columns stay aligned.
const (
	green   = "\x1b[32m"
	red     = "\x1b[31m"
	yellow  = "\x1b[33m"
	neutral = "\x1b[39m"
	reset   = "\x1b[0m"
)

// Print prints a tree as `clusterctl describe cluster` does: a row per
// object, its branch in the NAME column, then its condition's STATUS,
// REASON, SINCE and MESSAGE; below an object, a row per condition when the
// tree carries them.
func Print(w io.Writer, root *Node, o PrintOptions) error {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	p := printer{w: tw, o: o, ns: root.Namespace}
	// The header's STATUS is wrapped like every status, so that the
	// escape sequences, which tabwriter counts, widen every row alike.
	fmt.Fprintf(tw, "NAME\t%s%s\tREASON\tSINCE\tMESSAGE\n", p.plan("PLAN"), p.colored(neutral, "STATUS"))
	p.row(root, "", "", true)
	if err := tw.Flush(); err != nil {
		return err
	}
	// Rows end where their text does, not where the widest row's columns
	// would.
	for line := range strings.Lines(buf.String()) {
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

type printer struct {
	w  io.Writer
	o  PrintOptions
	ns string
}

// row prints n and, below it, its conditions and its children. prefix is
// the branch drawn before n's name, indent the one drawn before its
// children's.
func (p printer) row(n *Node, prefix, indent string, root bool) {
	fmt.Fprintf(p.w, "%s%s\t%s%s\t%s\t%s\t%s\n", prefix, printable(p.label(n, root)), p.plan(n.Plan), p.status(n.Status), printable(n.Reason), p.since(n.Since), printable(p.message(n)))
	for i, c := range n.Conditions {
		branch := "├─"
		if i == len(n.Conditions)-1 && len(n.Children) == 0 {
			branch = "└─"
		}
		fmt.Fprintf(p.w, "%s%s· %s\t%s%s\t%s\t%s\t%s\n", indent, branch, printable(c.Type), p.plan(""), p.status(c.Status), printable(c.Reason), p.since(&c.LastTransitionTime), printable(oneLine(c.Message)))
	}
	for i, c := range n.Children {
		branch, next := "├─", "│ "
		if i == len(n.Children)-1 {
			branch, next = "└─", "  "
		}
		p.row(c, indent+branch, indent+next, false)
	}
}

// label names a node: its kind and name, the namespace only where it is not
// the root's, and its role where the kind does not say it.
func (p printer) label(n *Node, root bool) string {
	name := n.Name
	if n.Namespace != "" && (root || n.Namespace != p.ns) {
		name = n.Namespace + "/" + n.Name
	}
	switch {
	case n.Kind == n.Name: // Workers, Other
		return n.Name
	case n.Role == "Credentials" || (n.APIVersion == "" && n.Role != ""):
		return strings.TrimSpace(fmt.Sprintf("%s: %s %s", n.Role, n.Kind, name))
	}
	return strings.TrimSpace(n.Kind + " " + name)
}

// plan is the PLAN column's cell and its tab, when the tree has the column.
func (p printer) plan(s string) string {
	if !p.o.Plan {
		return ""
	}
	return printable(s) + "\t"
}

func (p printer) colored(c, s string) string {
	if !p.o.Color {
		return s
	}
	return c + s + reset
}

func (p printer) status(s metav1.ConditionStatus) string {
	c := neutral
	switch s {
	case metav1.ConditionTrue:
		c = green
	case metav1.ConditionFalse:
		c = red
	case metav1.ConditionUnknown:
		c = yellow
	}
	return p.colored(c, printable(string(s)))
}

func (p printer) since(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return duration.HumanDuration(p.o.Now.Sub(t.Time))
}

func (p printer) message(n *Node) string {
	if n.Message == "" && n.ExternalName != "" {
		return "external name " + n.ExternalName
	}
	return n.Message
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// printable escapes what a terminal would act on rather than show (escape
// sequences, carriage returns, tabs that would shift the table): names,
// messages and annotations printed here are written by tenants.
func printable(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
