package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/internal/compcheck"
	"github.com/capxp/cluster-api-provider-crossplane/internal/describe"
	"github.com/capxp/cluster-api-provider-crossplane/internal/plan"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
)

const planUsage = `Usage: capxp plan -f FILE [-n NAMESPACE] [flags]

Says, before you apply FILE, which Machines CAPI will replace and which
stay, for every Cluster of the namespaces FILE changes. FILE holds the
objects as you would apply them (kubectl apply -f): a MachineDeployment or
KubeadmControlPlane edit, a new template they name, a scale. Each object's
fields replace the live object's (lists whole), and CAPI's own rollout rules
decide: a MachineDeployment's (a MachineSet whose template, version,
bootstrap, infrastructure template or failure domain differs, or whose
rolloutAfter has passed, is replaced; labels, annotations, timeouts, taints
and minReadySeconds change in place) and a KubeadmControlPlane's (its
version, KubeadmConfig, infrastructure template, rolloutAfter and
rolloutBefore). For each XR the change reaches (an XR it edits, the XRs
whose Composition it changes, a replaced Machine's) it renders Crossplane's
pipeline with the real functions against what the XR composed, and says
which composed resources are created, deleted or changed, and which fields;
an XR pinned to its Composition revision says the change reaches it only
when its Machine is replaced. It only reads, with your identity: a tenant
plans in its own namespace with its own role. A cluster-scoped object (a
Composition) is planned for the namespace of -n. A Cluster with a managed
topology is planned as CAPI's topology controller would write it (CAPI's own
generator of its desired state), for a change of its topology, its
ClusterClass or a class's template. A MachinePool's change is a scale, and
reaches its instances through its XR, rendered as the bridge will write it.
It does not predict Machines of no MachineDeployment, KubeadmControlPlane or
MachinePool, and says so for each.

Flags:
  -f FILE                  the change (YAML or JSON, several documents; - for stdin)
  --package FILE           a Compositions Configuration package (.xpkg): its
                           Compositions are planned as new revisions (with -f
                           or alone)
  -n, --namespace NS       the namespace of objects that name none (default: the context's)
  --kubeconfig PATH        the kubeconfig (default: $KUBECONFIG, ~/.kube/config)
  --context NAME           the kubeconfig context
  --as USER                read as this user (impersonation), as kubectl --as
  --as-group GROUP         read as a member of this group too (repeatable)
  -o table|json|tree       the output (default table); tree draws each
                           Cluster as capxp describe does, with a PLAN column
  --tools-dir DIR          where the render engine's crossplane binary and
                           functions are (default: tools/ beside capxp, as the
                           release's archive has it, else .cache/tools)
  --function-asg-instances BINARY  CAPXP's function (default: beside capxp)

Each composed resource created or changed is judged as admission will judge
it, by the namespace's NamespaceCredentials: one naming credentials the
namespace may not use is listed refused, and an XR whose providerConfigRef
names such credentials is listed held (the bridge holds it).

Exit status: 0 when nothing would be replaced or deleted, 3 when a Machine
or a composed resource would be, or one would be refused or held for its
credentials (a gate for a pipeline), 1 when the cluster cannot be read, 2
for bad input (a flag, the file, no kubeconfig).
`

// exitReplaces: the plan replaces or deletes Machines.
const exitReplaces = 3

// runPlan runs `capxp plan`; it returns the exit status.
func runPlan(args []string, stdout, stderr io.Writer) int {
	c := command{name: "capxp plan", usage: planUsage, stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	// The flag package's own messages are replaced by usageError's line.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var file, pkgFile, output, toolsDir, ownFunction string
	var a access
	a.flags(fs)
	fs.StringVar(&file, "f", "", "")
	fs.StringVar(&pkgFile, "package", "", "")
	fs.StringVar(&output, "o", "table", "")
	fs.StringVar(&toolsDir, "tools-dir", string(defaultToolsDir()), "")
	fs.StringVar(&ownFunction, "function-asg-instances", ownFunctionBinary(), "")
	positional, status, ok := c.parse(fs, args)
	if !ok {
		return status
	}
	switch {
	case len(positional) > 0:
		return c.usageError("takes no argument, got %q", strings.Join(positional, " "))
	case file == "" && pkgFile == "":
		return c.usageError("-f FILE or --package FILE is required: the change to plan")
	}
	if err := oneOf("-o", output, "table", outputJSON, "tree"); err != nil {
		return c.usageError("%v", err)
	}
	var proposed []*unstructured.Unstructured
	if file != "" {
		var err error
		if proposed, err = readChange(file, os.Stdin); err != nil {
			return c.badInput(err)
		}
	}
	var pkg *plan.Package
	if pkgFile != "" {
		var err error
		if pkg, err = plan.ReadPackage(pkgFile); err != nil {
			return c.badInput(err)
		}
	}
	cl, ns, err := a.client(plan.Scheme())
	if err != nil {
		return c.outcome(err)
	}
	if pkg != nil {
		// The package manager replaces what it installs whole.
		installed, err := plan.Replacing(context.Background(), cl, pkg.Compositions)
		if err != nil {
			return c.failed(err)
		}
		proposed = append(proposed, installed...)
	}
	for _, u := range proposed {
		namespaced, err := cl.IsObjectNamespaced(u)
		if err != nil {
			return c.failed(errors.Wrapf(err, "cannot tell whether %s %s is namespaced", u.GetKind(), u.GetName()))
		}
		switch {
		case !namespaced:
			u.SetNamespace("")
		case u.GetNamespace() == "":
			u.SetNamespace(ns)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var rd plan.Renderer
	if e, err := compcheck.StartEngine(ctx, tools.Dir(toolsDir), ownFunction); err != nil {
		rd = plan.NoRenderer{Reason: errors.Wrap(err, "the render engine does not start (capxp's tools folder, or --tools-dir)")}
	} else {
		defer func() { _ = e.Stop() }()
		rd = e
	}
	p, err := planNamespaces(ctx, cl, rd, proposed, ns, metav1.Now())
	if err != nil {
		return c.failed(err)
	}
	if pkg != nil && len(pkg.XRDs) > 0 {
		p.Unknown = append(p.Unknown, fmt.Sprintf("the XRDs of Configuration %s (%s): plan plans its Compositions, not a change of their schemas",
			pkg.Name, strings.Join(pkg.XRDs, ", ")))
	}
	switch output {
	case outputJSON:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(p)
	case "tree":
		err = printPlanTree(ctx, stdout, cl, p)
	default:
		err = printPlan(stdout, p)
	}
	if err != nil {
		return c.failed(err)
	}
	if p.Replaces() {
		return exitReplaces
	}
	return exitOK
}

// readChange decodes the objects of a change.
func readChange(file string, stdin io.Reader) ([]*unstructured.Unstructured, error) {
	var raw []byte
	var err error
	if file == "-" {
		raw, err = io.ReadAll(stdin)
	} else {
		raw, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, errors.Wrap(err, "cannot read the change")
	}
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for i := 1; ; i++ {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, errors.Wrapf(err, "%s: cannot decode document %d", file, i)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, errors.Errorf("%s: document %d has no apiVersion, kind or metadata.name", file, i)
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, errors.Errorf("%s holds no object", file)
	}
	return out, nil
}

// planNamespaces plans each namespace the change's namespaced objects
// name, or ns when it names none; its cluster-scoped objects (a
// Composition) are part of each namespace's plan.
func planNamespaces(ctx context.Context, c client.Client, rd plan.Renderer, proposed []*unstructured.Unstructured, ns string, now metav1.Time) (*plan.Plan, error) {
	byNS := map[string][]*unstructured.Unstructured{}
	var clusterScoped []*unstructured.Unstructured
	for _, u := range proposed {
		if u.GetNamespace() == "" {
			clusterScoped = append(clusterScoped, u)
			continue
		}
		byNS[u.GetNamespace()] = append(byNS[u.GetNamespace()], u)
	}
	if len(byNS) == 0 {
		byNS[ns] = nil
	}
	for k := range byNS {
		byNS[k] = append(byNS[k], clusterScoped...)
	}
	namespaces := make([]string, 0, len(byNS))
	for ns := range byNS {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	all := &plan.Plan{}
	for _, ns := range namespaces {
		o, err := plan.Observe(ctx, c, ns)
		if err != nil {
			return nil, err
		}
		p, err := plan.Predict(ctx, c, rd, plan.ReadCredentials(ctx, c, ns, credentials.DefaultProviders), o, byNS[ns], now)
		if err != nil {
			return nil, err
		}
		for _, ch := range p.Changes {
			if !slices.Contains(all.Changes, ch) {
				all.Changes = append(all.Changes, ch)
			}
		}
		all.Clusters = append(all.Clusters, p.Clusters...)
		all.XRs = append(all.XRs, p.XRs...)
		for _, u := range p.Unknown {
			if !slices.Contains(all.Unknown, u) {
				all.Unknown = append(all.Unknown, u)
			}
		}
	}
	return all, nil
}

// printPlan prints the changes, then each cluster's Machines.
func printPlan(w io.Writer, p *plan.Plan) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	printChanges(tw, p)
	for _, cl := range p.Clusters {
		fmt.Fprintf(tw, "\nCluster %s/%s: %s\n", cl.Namespace, cl.Name, cl.Summary())
		if len(cl.Machines) > 0 {
			fmt.Fprintln(tw, "MACHINE\tOWNER\tVERDICT\tWHY")
			for _, m := range cl.Machines {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Name, m.Owner, m.Verdict, strings.Join(m.Reasons, "; "))
			}
		}
		printUnknown(tw, cl.Unknown)
	}
	for i := range p.XRs {
		printXR(tw, &p.XRs[i])
	}
	if len(p.Unknown) > 0 {
		fmt.Fprintln(tw)
		printUnknown(tw, p.Unknown)
	}
	return tw.Flush()
}

// printPlanTree prints the change's objects, then each Cluster's tree as
// `capxp describe` draws it with what the plan says of each object in a
// PLAN column, then the XRs the plan reaches outside those trees.
func printPlanTree(ctx context.Context, w io.Writer, c client.Client, p *plan.Plan) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	printChanges(tw, p)
	if err := tw.Flush(); err != nil {
		return err
	}
	placed := map[*plan.XR]bool{}
	for _, cl := range p.Clusters {
		fmt.Fprintf(w, "\nCluster %s/%s: %s\n", cl.Namespace, cl.Name, cl.Summary())
		tree, err := describe.Cluster(ctx, c, cl.Namespace, cl.Name, describe.Options{})
		if err != nil {
			fmt.Fprintf(w, "not drawn: %v\n", err)
			continue
		}
		here := p.Annotate(tree)
		maps.Copy(placed, here)
		if err := describe.Print(w, tree, describe.PrintOptions{Plan: true}); err != nil {
			return err
		}
		printUnknown(w, cl.Unknown)
		for i := range p.XRs {
			if x := &p.XRs[i]; here[x] {
				for _, u := range x.Unknown {
					fmt.Fprintf(w, "not predicted of %s %s: %s\n", x.Kind, x.Name, u)
				}
			}
		}
	}
	for i := range p.XRs {
		if !placed[&p.XRs[i]] {
			printXR(tw, &p.XRs[i])
		}
	}
	if len(p.Unknown) > 0 {
		fmt.Fprintln(tw)
		printUnknown(tw, p.Unknown)
	}
	return tw.Flush()
}

// printChanges prints the change's objects and what applying does to each.
func printChanges(w io.Writer, p *plan.Plan) {
	fmt.Fprintln(w, "CHANGE\tACTION")
	for _, ch := range p.Changes {
		fmt.Fprintf(w, "%s %s\t%s\n", ch.Kind, path.Join(ch.Namespace, ch.Name), ch.Action)
	}
}

// printUnknown prints what plan cannot know, a line each.
func printUnknown(w io.Writer, unknown []string) {
	for _, u := range unknown {
		fmt.Fprintf(w, "not predicted: %s\n", u)
	}
}

// printXR prints what Crossplane will do to what an XR composes.
func printXR(tw io.Writer, x *plan.XR) {
	fmt.Fprintf(tw, "\n%s %s/%s (Composition %s): %s\n", x.Kind, x.Namespace, x.Name, x.Composition, x.Summary())
	if len(x.Edited) > 0 {
		fmt.Fprintf(tw, "edited: %s\n", strings.Join(x.Edited, ", "))
	}
	if x.Held != "" {
		fmt.Fprintf(tw, "held: %s\n", x.Held)
	}
	if len(x.Changes) > 0 {
		fmt.Fprintln(tw, "RESOURCE\tKIND\tNAME\tACTION\tFIELDS")
		for _, ch := range x.Changes {
			action := ch.Action
			if ch.Refused != "" {
				action += " (refused: " + ch.Refused + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ch.Resource, ch.Kind, ch.Name, action, strings.Join(ch.Fields, ", "))
		}
	}
	printUnknown(tw, x.Unknown)
}
