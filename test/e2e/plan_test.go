package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/dev/localkube"
	"github.com/capxp/cluster-api-provider-crossplane/dev/plane"
	"github.com/capxp/cluster-api-provider-crossplane/internal/plan"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/test/envtest"
	"github.com/capxp/cluster-api-provider-crossplane/test/planner"
)

// TestPlan scripts changes to a copy of examples/local, runs `capxp plan`
// on each as a user who may only read the namespace, applies it, waits
// until CAPI has rolled it out, and fails unless the plan named exactly the
// Machines that were replaced, and exactly the scale.
func TestPlan(t *testing.T) {
	ctx := t.Context()
	const name = "planned"
	e := availableCopy(t, name, 2*time.Minute)
	ns := e.Namespace()

	bindPlanner(t, ns)

	md, kcp := name+"-workers", name+"-control-plane"
	mdChange := func(spec string) string {
		return fmt.Sprintf("apiVersion: cluster.x-k8s.io/v1beta2\nkind: MachineDeployment\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n%s", md, ns, spec)
	}
	kcpChange := func(spec string) string {
		return fmt.Sprintf("apiVersion: controlplane.cluster.x-k8s.io/v1beta2\nkind: KubeadmControlPlane\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n%s", kcp, ns, spec)
	}
	xrChange := func(composition string) string {
		return fmt.Sprintf("apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1\nkind: CrossplaneCluster\nmetadata:\n  name: %s\n  namespace: %s\n"+
			"spec:\n  crossplane:\n    compositionRef:\n      name: %s\n", name, ns, composition)
	}
	xrCredentials := func(kind, config string) string {
		return fmt.Sprintf("apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1\nkind: CrossplaneCluster\nmetadata:\n  name: %s\n  namespace: %s\n"+
			"spec:\n  providerConfigRef:\n    apiGroup: kubernetes.m.crossplane.io\n    kind: %s\n    name: %s\n", name, ns, kind, config)
	}
	// A shared config no grant lets the namespace use.
	ungranted := "ungranted-" + name
	shared := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"credentials": map[string]any{
		"source": "Secret", "secretRef": map[string]any{"namespace": ns, "name": "workload-kubeconfig", "key": "kubeconfig"},
	}}}}
	shared.SetAPIVersion("kubernetes.m.crossplane.io/v1alpha1")
	shared.SetKind("ClusterProviderConfig")
	shared.SetName(ungranted)
	createAs(t, shared)
	now := func() string { return time.Now().UTC().Add(-time.Second).Format(time.RFC3339) }
	// pkgFile is the package a step's change sets to be planned with
	// --package (its Compositions are what is applied).
	var pkgFile string
	steps := []struct {
		name   string
		change func() string
	}{
		{"MachineDeployment: a label on its Machines", func() string {
			return mdChange("  template:\n    metadata:\n      labels:\n        tier: gold\n")
		}},
		{"MachineDeployment: the drain timeout", func() string {
			return mdChange("  template:\n    spec:\n      deletion:\n        nodeDrainTimeoutSeconds: 30\n")
		}},
		{"MachineDeployment: scaled up", func() string { return mdChange("  replicas: 3\n") }},
		{"MachineDeployment: a new infrastructure template", func() string {
			return fmt.Sprintf(`apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: CrossplaneMachineTemplate
metadata:
  name: %[1]s-2
  namespace: %[2]s
spec:
  template:
    spec:
      parameters:
        size: small
      crossplane:
        compositionSelector:
          matchLabels:
            capxp.dev/backend: local
---
`, md, ns) + mdChange("  template:\n    spec:\n      infrastructureRef:\n        apiGroup: infrastructure.cluster.x-k8s.io\n        kind: CrossplaneMachineTemplate\n        name: "+md+"-2\n")
		}},
		{"MachineDeployment: rolloutAfter now", func() string { return mdChange("  rollout:\n    after: \"" + now() + "\"\n") }},
		{"MachineDeployment: scaled down", func() string { return mdChange("  replicas: 2\n") }},
		{"MachineDeployment: applied again unchanged", func() string { return mdChange("  replicas: 2\n") }},
		{"KubeadmControlPlane: a label on its Machines", func() string {
			return kcpChange("  machineTemplate:\n    metadata:\n      labels:\n        tier: gold\n")
		}},
		{"KubeadmControlPlane: rolloutAfter now", func() string { return kcpChange("  rollout:\n    after: \"" + now() + "\"\n") }},
		{"KubeadmControlPlane: the drain timeout", func() string {
			return kcpChange("  machineTemplate:\n    spec:\n      deletion:\n        nodeDrainTimeoutSeconds: 30\n")
		}},
		{"MachineDeployment: minReadySeconds", func() string { return mdChange("  template:\n    spec:\n      minReadySeconds: 5\n") }},
		{"MachineDeployment: the OnDelete strategy", func() string { return mdChange("  rollout:\n    strategy:\n      type: OnDelete\n") }},
		{"MachineDeployment: rolloutAfter now, under OnDelete", func() string { return mdChange("  rollout:\n    after: \"" + now() + "\"\n") }},
		{"MachineDeployment: back to RollingUpdate", func() string { return mdChange("  rollout:\n    strategy:\n      type: RollingUpdate\n") }},
		{"Composition: a label on what crossplanecluster-local composes", func() string { return compositionChange(t, "crossplanecluster-local", true) }},
		{"Composition: crossplanecluster-local as it was", func() string { return compositionChange(t, "crossplanecluster-local", false) }},
		{"Composition: a label on what crossplanemachine-local composes", func() string { return compositionChange(t, "crossplanemachine-local", true) }},
		{"Composition: crossplanemachine-local as it was", func() string { return compositionChange(t, "crossplanemachine-local", false) }},
		{"Configuration: a Compositions package labelling what crossplanecluster-local composes", func() string {
			return compositionsPackage(t, &pkgFile, "crossplanecluster-local")
		}},
		{"Configuration: the Compositions package as released", func() string { return compositionsPackage(t, &pkgFile, "") }},
		{"CrossplaneCluster: credentials the namespace was not granted", func() string { return xrCredentials("ClusterProviderConfig", ungranted) }},
		{"CrossplaneCluster: back to its own credentials", func() string { return xrCredentials("ProviderConfig", "workload") }},
		{"CrossplaneCluster: to the bring-your-own Composition", func() string { return xrChange("crossplanecluster-byo") }},
		{"CrossplaneCluster: back to the local Composition", func() string { return xrChange("crossplanecluster-local") }},
	}

	capxp := filepath.Join(bin, "capxp")
	var table []string
	disagree := 0
	for _, s := range steps {
		change := s.change()
		input := []string{"-f", "-"}
		if pkgFile != "" {
			input, pkgFile = []string{"--package", pkgFile}, ""
		}
		before := clusterMachines(t, ns, name)
		composedBefore := composedResources(t, ns, name)
		base := planArgs(ns, input...)
		got, stdout, exit := runPlan(t, s.name, ns, change, input...)
		predicted, scale := predictedFor(got, name)
		created, deleted, changed := predictedComposed(got, name)
		heldPredicted := heldIn(got, name)
		if exit != got.Replaces() {
			t.Errorf("%s: exit status 3 is %t, but the plan's Replaces is %t", s.name, exit, got.Replaces())
		}

		if len(predicted) > 0 {
			// The tree draws the same verdicts on describe's rows.
			tree := exec.CommandContext(ctx, capxp, append(slices.Clone(base), "-o", "tree")...)
			tree.Stdin = strings.NewReader(change)
			out, _ := tree.Output()
			for _, m := range predicted {
				if !regexp.MustCompile(`Machine ` + regexp.QuoteMeta(m) + ` +Replaced`).Match(out) {
					t.Errorf("%s: capxp plan -o tree does not draw Machine %s Replaced:\n%s", s.name, m, out)
				}
			}
		}
		applyChange(t, change)
		settled(t, ns, name, md, kcp)
		after := clusterMachines(t, ns, name)
		composedAfter := composedResources(t, ns, name)
		var gone []string
		for n := range before {
			if _, ok := after[n]; !ok {
				gone = append(gone, n)
			}
		}
		slices.Sort(gone)
		// A scale down deletes Machines that CAPI picks then: the plan
		// says how many.
		wantGone := len(predicted)
		if scale < 0 {
			wantGone -= scale
		}
		ok := len(gone) == wantGone && (scale < 0 || slices.Equal(gone, predicted))
		if n := len(after) - len(before) + len(gone) - len(predicted); scale > 0 && n != scale {
			ok = false
		}
		gotCreated, gotDeleted := sets.List(sets.KeySet(composedAfter).Difference(sets.KeySet(composedBefore))),
			sets.List(sets.KeySet(composedBefore).Difference(sets.KeySet(composedAfter)))
		if !slices.Equal(created, gotCreated) || !slices.Equal(deleted, gotDeleted) {
			ok = false
		}
		gotChanged := changedComposed(composedBefore, composedAfter, changed)
		var wantChanged []string
		for r, fields := range changed {
			for _, f := range fields {
				wantChanged = append(wantChanged, r+":"+f)
			}
		}
		slices.Sort(wantChanged)
		if !slices.Equal(wantChanged, gotChanged) {
			ok = false
		}
		heldActual := isHeld(t, ns, name)
		if heldPredicted != heldActual {
			ok = false
		}
		verdict := "agrees"
		if !ok {
			t.Logf("%s: the plan was:\n%s", s.name, stdout)
			disagree++
		}
		table = append(table, fmt.Sprintf("%-62s predicted: replaced %v, scale %+d, composed +%v -%v ~%v, held %t; happened: replaced or deleted %v, %d -> %d Machines, composed +%v -%v ~%v, held %t: %s",
			s.name, predicted, scale, created, deleted, wantChanged, heldPredicted, gone, len(before), len(after), gotCreated, gotDeleted, gotChanged, heldActual, verdict))
	}
	t.Logf("capxp plan against what happened:\n%s", strings.Join(table, "\n"))
	// The API server saw no write, nor an attempt at one, from the planner.
	if writes := writesBy(t, "planner"); len(writes) > 0 {
		t.Errorf("the API server saw %d writes from capxp plan, for example %s", len(writes), writes[0])
	}
	if disagree > 0 {
		t.Errorf("%d of %d plans disagree with what happened", disagree, len(steps))
	}
}

// predictedFor is what a plan says of one cluster's Machines: those it
// replaces, sorted, and the net scale of their owners (a MachinePool's
// instances are not Machines: poolScaleFor).
func predictedFor(p plan.Plan, cluster string) ([]string, int) {
	var replaced []string
	scale := 0
	for _, c := range p.Clusters {
		if c.Name != cluster {
			continue
		}
		for _, m := range c.Machines {
			if m.Verdict == plan.Replaced {
				replaced = append(replaced, m.Name)
			}
		}
		for _, s := range c.Scales {
			if !strings.HasPrefix(s.Owner, "MachinePool/") {
				scale += int(s.To - s.From)
			}
		}
	}
	slices.Sort(replaced)
	return replaced, scale
}

// poolScaleFor is the net scale a plan says of one cluster's MachinePools.
func poolScaleFor(p plan.Plan, cluster string) int {
	scale := 0
	for _, c := range p.Clusters {
		for _, s := range c.Scales {
			if c.Name == cluster && strings.HasPrefix(s.Owner, "MachinePool/") {
				scale += int(s.To - s.From)
			}
		}
	}
	return scale
}

// poolInstances counts the instances a cluster's MachinePools report
// (spec.providerIDList).
func poolInstances(t *testing.T, ns, cluster string) int {
	t.Helper()
	var l clusterv1.MachinePoolList
	if err := mgmt().List(t.Context(), &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range l.Items {
		if l.Items[i].Spec.ClusterName == cluster {
			n += len(l.Items[i].Spec.ProviderIDList)
		}
	}
	return n
}

// writesBy are the write requests the management API server's audit log
// recorded from user (impersonated), allowed or not.
func writesBy(t *testing.T, user string) []string {
	t.Helper()
	f, err := localkube.OpenAuditLog(p.ManagementAuditLog())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	var out []string
	for sc.Scan() {
		e := auditv1.Event{}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.ImpersonatedUser == nil || e.ImpersonatedUser.Username != user {
			continue
		}
		if e.ObjectRef != nil {
			out = append(out, fmt.Sprintf("%s %s %s/%s", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name))
		} else {
			out = append(out, e.Verb+" "+e.RequestURI)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// heldIn reports whether a plan says the bridge holds a cluster's
// CrossplaneCluster for its credentials.
func heldIn(p plan.Plan, cluster string) bool {
	for i := range p.XRs {
		x := &p.XRs[i]
		if x.Kind == "CrossplaneCluster" && x.Name == cluster && x.Held != "" {
			return true
		}
	}
	return false
}

// isHeld reports whether the bridge holds a cluster's CrossplaneCluster
// (paused for Crossplane).
func isHeld(t *testing.T, ns, cluster string) bool {
	t.Helper()
	x := clusterXROf(t, ns, cluster)
	return x.GetAnnotations()["crossplane.io/paused"] == "true"
}

// compositionChange is a Composition as it is, with or without a label on
// the first resource it composes: a new revision of it.
func compositionChange(t *testing.T, name string, label bool) string {
	t.Helper()
	c := &unstructured.Unstructured{}
	c.SetAPIVersion("apiextensions.crossplane.io/v1")
	c.SetKind("Composition")
	if err := mgmt().Get(t.Context(), client.ObjectKey{Name: name}, c); err != nil {
		t.Fatal(err)
	}
	labelFirstResource(t, c, label)
	change := &unstructured.Unstructured{Object: map[string]any{"spec": c.Object["spec"]}}
	change.SetGroupVersionKind(c.GroupVersionKind())
	change.SetName(c.GetName())
	raw, err := json.Marshal(change.Object)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// labelFirstResource sets (or removes) a label on the first resource a
// Composition's first pipeline step composes.
func labelFirstResource(t *testing.T, c *unstructured.Unstructured, label bool) {
	t.Helper()
	pipeline, _, _ := unstructured.NestedSlice(c.Object, "spec", "pipeline")
	step, _ := pipeline[0].(map[string]any)
	resources, _, _ := unstructured.NestedSlice(step, "input", "resources")
	r, _ := resources[0].(map[string]any)
	if label {
		if err := unstructured.SetNestedField(r, "yes", "base", "metadata", "labels", "capxp.dev/planned"); err != nil {
			t.Fatal(err)
		}
	} else {
		unstructured.RemoveNestedField(r, "base", "metadata", "labels", "capxp.dev/planned")
	}
	if err := unstructured.SetNestedSlice(step, resources, "input", "resources"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(c.Object, pipeline, "spec", "pipeline"); err != nil {
		t.Fatal(err)
	}
}

// compositionsPackage builds the release's Compositions Configuration with
// the crossplane CLI, as make release does, with a label on what the
// Composition labelled (when named) composes, into *file; it returns the
// package's Compositions, which is what installing it applies.
func compositionsPackage(t *testing.T, file *string, labelled string) string {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := release.WriteCompositionsRoot(root, release.Options{}); err != nil {
		t.Fatal(err)
	}
	if labelled != "" {
		paths, err := filepath.Glob(filepath.Join(root, "*", "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range paths {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			c := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(raw, &c.Object); err != nil || c.GetKind() != "Composition" || c.GetName() != labelled {
				continue
			}
			labelFirstResource(t, c, true)
			if raw, err = yaml.Marshal(c.Object); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, raw, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	*file = filepath.Join(dir, "configuration-capxp-compositions.xpkg")
	if err := release.BuildPackage(t.Context(), envtest.Tool("crossplane-cli", plane.CrossplaneCLIVersion), root, *file, ""); err != nil {
		t.Fatal(err)
	}
	pkg, err := plan.ReadPackage(*file)
	if err != nil {
		t.Fatal(err)
	}
	docs := make([]string, 0, len(pkg.Compositions))
	for _, c := range pkg.Compositions {
		raw, err := json.Marshal(c.Object)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(raw))
	}
	return strings.Join(docs, "\n---\n")
}

// predictedComposed is what a plan says Crossplane creates, deletes and
// changes (which fields) for a cluster's CrossplaneCluster, by the
// Composition's resource names.
func predictedComposed(p plan.Plan, cluster string) (created, deleted []string, changed map[string][]string) {
	return predictedComposedOf(p, "CrossplaneCluster", cluster)
}

// predictedComposedOf is what a plan says of one XR's composed resources.
func predictedComposedOf(p plan.Plan, kind, name string) (created, deleted []string, changed map[string][]string) {
	for i := range p.XRs {
		if x := &p.XRs[i]; x.Kind == kind && x.Name == name {
			return x.Actions()
		}
	}
	return nil, nil, map[string][]string{}
}

// composedResources are what a cluster's CrossplaneCluster composed, by
// the Composition's names, read by its resource references.
func composedResources(t *testing.T, ns, cluster string) map[string]*unstructured.Unstructured {
	t.Helper()
	return composedOf(t, clusterXROf(t, ns, cluster))
}

// composedOf is what an XR composed, by the Composition's names, read by
// its resource references.
func composedOf(t *testing.T, x *unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	ns := x.GetNamespace()
	refs, _, _ := unstructured.NestedSlice(x.Object, "spec", "crossplane", "resourceRefs")
	out := map[string]*unstructured.Unstructured{}
	for _, raw := range refs {
		ref, _ := raw.(map[string]any)
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(fmt.Sprint(ref["apiVersion"]))
		u.SetKind(fmt.Sprint(ref["kind"]))
		if err := mgmt().Get(t.Context(), client.ObjectKey{Namespace: ns, Name: fmt.Sprint(ref["name"])}, u); err != nil {
			continue
		}
		out[u.GetAnnotations()["crossplane.io/composition-resource-name"]] = u
	}
	return out
}

// changedComposed are the fields that changed of the composed resources that
// stayed, resource:field, sorted: the spec's and, of those the plan said
// change, its labels and annotations.
func changedComposed(before, after map[string]*unstructured.Unstructured, said map[string][]string) []string {
	var out []string
	for r, b := range before {
		if a, kept := after[r]; kept {
			for _, f := range changedSpec(b, a, said[r]) {
				out = append(out, r+":"+f)
			}
		}
	}
	slices.Sort(out)
	return out
}

// changedSpec are the leaf paths under spec whose values differ between
// two versions of an object, and of the paths given (labels, annotations)
// those that differ too.
func changedSpec(before, after *unstructured.Unstructured, also []string) []string {
	var out []string
	var walk func(b, a any, path string)
	walk = func(b, a any, path string) {
		bm, bok := b.(map[string]any)
		am, aok := a.(map[string]any)
		if bok && aok {
			for k := range am {
				walk(bm[k], am[k], path+"."+k)
			}
			for k := range bm {
				if _, ok := am[k]; !ok {
					out = append(out, path+"."+k)
				}
			}
			return
		}
		if fmt.Sprint(b) != fmt.Sprint(a) {
			out = append(out, path)
		}
	}
	walk(before.Object["spec"], after.Object["spec"], "spec")
	for _, p := range also {
		if strings.HasPrefix(p, "spec.") {
			continue
		}
		path := strings.Split(p, ".")
		for _, m := range []string{"metadata.labels.", "metadata.annotations."} {
			if key, ok := strings.CutPrefix(p, m); ok {
				path = append(strings.Split(strings.TrimSuffix(m, "."), "."), key)
			}
		}
		bv, _, _ := unstructured.NestedFieldNoCopy(before.Object, path...)
		av, _, _ := unstructured.NestedFieldNoCopy(after.Object, path...)
		if fmt.Sprint(bv) != fmt.Sprint(av) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// clusterMachines are a cluster's Machines by name, with their UIDs.
func clusterMachines(t *testing.T, ns, cluster string) map[string]types.UID {
	t.Helper()
	var ms clusterv1.MachineList
	if err := mgmt().List(t.Context(), &ms, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for i := range ms.Items {
		out[ms.Items[i].Name] = ms.Items[i].UID
	}
	return out
}

// applyChange applies a change's objects as `kubectl apply` of a file that
// sets their fields would: merged onto the live objects, created when new.
func applyChange(t *testing.T, change string) {
	t.Helper()
	d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(change), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err != nil {
			break
		}
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(u.GroupVersionKind())
		if err := mgmt().Get(t.Context(), client.ObjectKeyFromObject(u), live); err != nil {
			createAs(t, u)
			continue
		}
		raw, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		if err := mgmt().Patch(t.Context(), live, client.RawPatch(types.MergePatchType, raw)); err != nil {
			t.Fatal(err)
		}
	}
}

// settled waits until Crossplane has composed the CrossplaneCluster's
// generation and CAPI has rolled a change out: the MachineDeployment
// and the KubeadmControlPlane have observed their generation and have as
// many Machines, all up to date and available, as they want.
func settled(t *testing.T, ns, cluster, md, kcp string) {
	t.Helper()
	// A rollout starts within a reconcile; give it that before looking.
	time.Sleep(3 * time.Second)
	eventually(t, "the change is rolled out", 4*time.Minute, func() error {
		x := &unstructured.Unstructured{}
		x.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1alpha1")
		x.SetKind("CrossplaneCluster")
		if err := mgmt().Get(t.Context(), client.ObjectKey{Namespace: ns, Name: cluster}, x); err != nil {
			return err
		}
		if x.GetAnnotations()["crossplane.io/paused"] == "true" {
			// Held by the bridge: Crossplane composes nothing until
			// it is released.
			return nil
		}
		// An XR that follows its Composition's newest revision is on it.
		comp, _, _ := unstructured.NestedString(x.Object, "spec", "crossplane", "compositionRef", "name")
		rev, _, _ := unstructured.NestedString(x.Object, "spec", "crossplane", "compositionRevisionRef", "name")
		revs := &unstructured.UnstructuredList{}
		revs.SetAPIVersion("apiextensions.crossplane.io/v1")
		revs.SetKind("CompositionRevisionList")
		if err := mgmt().List(t.Context(), revs, client.MatchingLabels{"crossplane.io/composition-name": comp}); err != nil {
			return err
		}
		newest, highest := "", int64(-1)
		for i := range revs.Items {
			if n, _, _ := unstructured.NestedInt64(revs.Items[i].Object, "spec", "revision"); n > highest {
				newest, highest = revs.Items[i].GetName(), n
			}
		}
		if newest != "" && rev != newest {
			return fmt.Errorf("CrossplaneCluster %s is on CompositionRevision %q, not yet the newest, %s", cluster, rev, newest)
		}
		for _, typ := range []string{"Synced", "Ready"} {
			c := condition(*x, typ)
			if c["status"] != "True" || fmt.Sprint(c["observedGeneration"]) != fmt.Sprint(x.GetGeneration()) {
				return fmt.Errorf("CrossplaneCluster %s: %s is %v at generation %v, want True at %d", cluster, typ, c["status"], c["observedGeneration"], x.GetGeneration())
			}
		}
		d := &clusterv1.MachineDeployment{}
		if err := mgmt().Get(t.Context(), client.ObjectKey{Namespace: ns, Name: md}, d); err != nil {
			return err
		}
		want := ptr.Deref(d.Spec.Replicas, 0)
		// Under OnDelete, outdated Machines stay until someone deletes
		// them.
		upToDate := ptr.Deref(d.Status.UpToDateReplicas, -1)
		if d.Spec.Rollout.Strategy.Type == clusterv1.OnDeleteMachineDeploymentStrategyType {
			upToDate = want
		}
		if d.Status.ObservedGeneration != d.Generation || ptr.Deref(d.Status.Replicas, -1) != want ||
			upToDate != want || ptr.Deref(d.Status.AvailableReplicas, -1) != want {
			return fmt.Errorf("MachineDeployment %s: generation %d observed %d, replicas %v up to date %v available %v, want %d",
				md, d.Generation, d.Status.ObservedGeneration, ptr.Deref(d.Status.Replicas, -1), ptr.Deref(d.Status.UpToDateReplicas, -1), ptr.Deref(d.Status.AvailableReplicas, -1), want)
		}
		c := &controlplanev1.KubeadmControlPlane{}
		if err := mgmt().Get(t.Context(), client.ObjectKey{Namespace: ns, Name: kcp}, c); err != nil {
			return err
		}
		want = ptr.Deref(c.Spec.Replicas, 0)
		if c.Status.ObservedGeneration != c.Generation || ptr.Deref(c.Status.Replicas, -1) != want ||
			ptr.Deref(c.Status.UpToDateReplicas, -1) != want || ptr.Deref(c.Status.AvailableReplicas, -1) != want {
			return fmt.Errorf("KubeadmControlPlane %s: generation %d observed %d, replicas %v up to date %v available %v, want %d",
				kcp, c.Generation, c.Status.ObservedGeneration, ptr.Deref(c.Status.Replicas, -1), ptr.Deref(c.Status.UpToDateReplicas, -1), ptr.Deref(c.Status.AvailableReplicas, -1), want)
		}
		return nil
	})
}

// planChecks plans changes of a Cluster before they are made, and holds
// each plan against what then happened: the Machines replaced, the scale,
// and what the cluster's infrastructure XR composed and deleted.
type planChecks struct {
	rows     []string
	disagree int
}

// change plans a merge patch of an object of a cluster's as the planner,
// applies it, and returns what to call once the change has taken effect:
// it compares the plan with what happened to the cluster's Machines and to
// what xrs composed.
func (pc *planChecks) change(t *testing.T, step, cluster string, xrs []xrRef, target *unstructured.Unstructured, patchOf map[string]any) func() {
	t.Helper()
	ns := target.GetNamespace()
	body, err := json.Marshal(map[string]any{"apiVersion": target.GetAPIVersion(), "kind": target.GetKind(),
		"metadata": map[string]any{"namespace": ns, "name": target.GetName()}, "spec": patchOf["spec"]})
	if err != nil {
		t.Fatal(err)
	}
	got, out, _ := runPlan(t, step, ns, string(body))
	predicted, scale := predictedFor(got, cluster)
	poolScale := poolScaleFor(got, cluster)
	var created, deleted, wantChanged []string
	changed := map[string][]string{}
	for _, x := range xrs {
		c, d, ch := predictedComposedOf(got, x.kind, x.name)
		created, deleted = append(created, x.prefixed(c)...), append(deleted, x.prefixed(d)...)
		for r, fields := range ch {
			changed[x.prefixed([]string{r})[0]] = fields
			for _, f := range fields {
				wantChanged = append(wantChanged, x.prefixed([]string{r})[0]+":"+f)
			}
		}
	}
	slices.Sort(created)
	slices.Sort(deleted)
	slices.Sort(wantChanged)
	composed := func() map[string]*unstructured.Unstructured {
		out := map[string]*unstructured.Unstructured{}
		for _, x := range xrs {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(infrav1.GroupVersion.String())
			u.SetKind(x.kind)
			if err := mgmt().Get(t.Context(), client.ObjectKey{Namespace: ns, Name: x.name}, u); err != nil {
				t.Fatal(err)
			}
			for r, c := range composedOf(t, u) {
				out[x.prefixed([]string{r})[0]] = c
			}
		}
		return out
	}
	before, composedBefore, poolsBefore := clusterMachines(t, ns, cluster), composed(), poolInstances(t, ns, cluster)
	patch(t, target, patchOf)
	return func() {
		t.Helper()
		after, composedAfter, poolsAfter := clusterMachines(t, ns, cluster), composed(), poolInstances(t, ns, cluster)
		var gone []string
		for n := range before {
			if _, ok := after[n]; !ok {
				gone = append(gone, n)
			}
		}
		slices.Sort(gone)
		gotScale := len(after) - len(before)
		gotCreated := sets.List(sets.KeySet(composedAfter).Difference(sets.KeySet(composedBefore)))
		gotDeleted := sets.List(sets.KeySet(composedBefore).Difference(sets.KeySet(composedAfter)))
		// A scale down deletes Machines CAPI picks then, beside those the
		// plan names.
		replacedOK := slices.Equal(gone, predicted)
		if scale < 0 {
			replacedOK = len(gone) == len(predicted)-scale && sets.New(gone...).HasAll(predicted...)
		}
		gotPoolScale := poolsAfter - poolsBefore
		gotChanged := changedComposed(composedBefore, composedAfter, changed)
		ok := replacedOK && gotScale == scale && gotPoolScale == poolScale && slices.Equal(created, gotCreated) && slices.Equal(deleted, gotDeleted) &&
			slices.Equal(wantChanged, gotChanged)
		verdict := "agrees"
		if !ok {
			t.Logf("%s: the plan was:\n%s", step, out)
			verdict = "DISAGREES"
			pc.disagree++
		}
		pc.rows = append(pc.rows, fmt.Sprintf("%-50s predicted: replaced %v, scale %+d, pool %+d, composed +%v -%v ~%v; happened: replaced %v, scale %+d, pool %+d, composed +%v -%v ~%v: %s",
			step, predicted, scale, poolScale, created, deleted, wantChanged, gone, gotScale, gotPoolScale, gotCreated, gotDeleted, gotChanged, verdict))
	}
}

// xrRef names an XR of CAPXP's whose composed resources a plan check
// follows.
type xrRef struct{ kind, name string }

// prefixed names composed resources by their XR: kind/name:resource.
func (x xrRef) prefixed(resources []string) []string {
	out := make([]string, 0, len(resources))
	for _, r := range resources {
		out = append(out, x.kind+"/"+x.name+":"+r)
	}
	return out
}

// report prints the agreement table, and fails the test on a disagreement.
func (pc *planChecks) report(t *testing.T) {
	t.Helper()
	t.Logf("capxp plan against what happened:\n%s", strings.Join(pc.rows, "\n"))
	if writes := writesBy(t, "planner"); len(writes) > 0 {
		t.Errorf("the API server saw %d writes from capxp plan, for example %s", len(writes), writes[0])
	}
	if pc.disagree > 0 {
		t.Errorf("%d of %d plans disagree with what happened", pc.disagree, len(pc.rows))
	}
}

// bindPlanner binds the user "planner" to the shipped planner roles
// (config/rbac/planner.yaml).
func bindPlanner(t *testing.T, ns string) {
	t.Helper()
	if err := planner.Bind(t.Context(), mgmt(), ns); err != nil {
		t.Fatal(err)
	}
}

// planArgs are capxp plan's arguments for a change read from stdin, in ns,
// as the planner.
func planArgs(ns string, input ...string) []string {
	return planner.Args(p.Kubeconfig(), bin, ns, input...)
}

// runPlan plans a change as the planner: the plan, its JSON, and whether
// it exited 3 (something would be replaced or deleted).
func runPlan(t *testing.T, step, ns, change string, input ...string) (plan.Plan, string, bool) {
	t.Helper()
	got, out, exit, err := planner.Run(t.Context(), bin, planArgs(ns, input...), change)
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	return got, out, exit
}
