// Package compcheck checks a Composition against CAPI's InfraCluster or
// InfraMachine contract, offline: it renders an example XR with Crossplane's
// real engine and the real functions, feeds the composed resources back as
// their providers would report them (compositions.Provide) round after
// round until the XR is ready, and gives a verdict per contract field, with
// the bridge's own output mapping. `capxp composition check` and the
// project's render tests use it.
package compcheck

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	capxp "github.com/capxp/cluster-api-provider-crossplane"
	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/gate"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/outputs"
	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release"
	"github.com/capxp/cluster-api-provider-crossplane/internal/render"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
	"github.com/capxp/cluster-api-provider-crossplane/packages"
)

// annotationExternalName names the external resource of a managed resource.
const annotationExternalName = "crossplane.io/external-name"

// MaxRounds is how many reconciles a Composition gets to make its XR ready,
// each with the composed resources of the one before reported ready.
const MaxRounds = 8

// BootstrapData is the bootstrap Secret's content in a check: a value no
// Composition could produce, so that finding it in a composed resource
// means the Composition copied it there.
const BootstrapData = "#cloud-config\n# capxp-check-bootstrap-data: must stay in its Secret\n"

// Fields a verdict is about.
const (
	FieldRenders          = "renders"
	FieldReady            = "ready"
	FieldEndpoint         = "control-plane endpoint"
	FieldFailureDomains   = "failure domains"
	FieldNetwork          = "network outputs"
	FieldProviderID       = "providerID"
	FieldAddresses        = "addresses"
	FieldFailureDomain    = "failure domain placement"
	FieldCredentials      = "credentials"
	FieldBootstrapByRef   = "bootstrap data by reference"
	FieldValid            = "valid for the providers' CRDs"
	FieldDeletion         = "deletion"
	FieldVersion          = "version"
	FieldKubeconfig       = "kubeconfig by reference"
	FieldProviderIDList   = "providerIDList"
	contractInfraCluster  = infrav1.ContractInfraCluster
	contractInfraMachine  = infrav1.ContractInfraMachine
	contractMachinePool   = infrav1.ContractInfraMachinePool
	contractControlPlane  = infrav1.ContractControlPlane
	providerConfigRefPath = "spec.providerConfigRef"
)

// Verdict is the check of one contract field.
type Verdict struct {
	Field  string `json:"field"`
	OK     bool   `json:"ok"`
	Reason string `json:"reason"`
}

// Input is what a check renders.
type Input struct {
	// Contract is InfraCluster, InfraMachine, InfraMachinePool or
	// ControlPlane (the XRD's capxp.dev/contract label).
	Contract    string
	Composition *unstructured.Unstructured
	XRD         *unstructured.Unstructured
	XR          *unstructured.Unstructured
	// Example says where the XR came from, for the report.
	Example string
	// CRDs are the composed kinds' CRDs; nil leaves the composed resources
	// unchecked against them.
	CRDs *CRDs
	// Observed are composed resources as their providers reported them,
	// by the name of the Composition's resource template
	// (crossplane.io/composition-resource-name): they stand for those
	// resources in every round, and compositions.Provide for the others.
	Observed map[string]*unstructured.Unstructured
}

// Result is a Composition driven to readiness, or as far as it got.
type Result struct {
	// Rounds is how many reconciles were rendered.
	Rounds int
	// First is the first round's output.
	First *render.Output
	// Last is the last round's output; XR the XR as the API server would
	// hold it after it; Observed the composed resources as their providers
	// report them.
	Last     *render.Output
	XR       *unstructured.Unstructured
	Observed []*unstructured.Unstructured
	// Err is the pipeline's failure, if it failed.
	Err error
	// Verdicts are the checks, one per field, in a fixed order.
	Verdicts []Verdict
}

// OK reports whether every verdict holds.
func (r *Result) OK() bool {
	for _, v := range r.Verdicts {
		if !v.OK {
			return false
		}
	}
	return len(r.Verdicts) > 0
}

// Check renders in with e until the XR is ready (at most MaxRounds
// reconciles) and judges every contract field. An error is returned only
// for what is not the Composition's fault (the engine failing to run).
func Check(ctx context.Context, e *render.Engine, in Input) (*Result, error) {
	if !slices.Contains([]string{contractInfraCluster, contractInfraMachine, contractMachinePool, contractControlPlane}, in.Contract) {
		return nil, errors.Errorf("contract %q: want %s, %s, %s or %s", in.Contract, contractInfraCluster, contractInfraMachine, contractMachinePool, contractControlPlane)
	}
	// A provider ID the Composition declares before composing is in the
	// XR's spec from the start, as the bridge writes it when the gate opens.
	var assign error
	if t := in.Composition.GetAnnotations()[infrav1.ProviderIDAnnotation]; t != "" && in.Contract == contractInfraMachine {
		var id string
		if id, assign = gate.ProviderID(t, in.XR); assign == nil {
			in.XR = in.XR.DeepCopy()
			_ = unstructured.SetNestedField(in.XR.Object, id, "spec", "providerID")
		}
	}
	asg := newAutoScaling()
	defer asg.close()
	extra := append([]*unstructured.Unstructured{BootstrapSecret(in.XR)}, asg.credentials(in.XR)...)
	xr := in.XR.DeepCopy()
	var observed []*unstructured.Unstructured
	r := &Result{}
	// The rules on what is composed hold in every round, not only the
	// last: credentials and bootstrap data of each round are judged.
	var rules []Verdict
	for r.Rounds < MaxRounds {
		r.Rounds++
		out, err := e.Render(ctx, render.Input{XR: xr, Composition: in.Composition, XRD: in.XRD, Observed: observed, Extra: extra})
		if out == nil {
			return nil, err
		}
		if r.First == nil {
			r.First = out
		}
		r.Last = out
		r.XR = Applied(in.XR, out.XR)
		rules = worst(rules, []Verdict{credentials(in.XR, out.Composed), bootstrapByReference(append([]*unstructured.Unstructured{out.XR}, out.Composed...))}, r.Rounds)
		if err != nil {
			r.Err = err
			break
		}
		if ready(out.XR) {
			break
		}
		xr, observed = r.XR, observe(out.Composed, in.Observed)
		r.Observed = observed
		asg.observe(in.XR, observed)
	}
	r.Verdicts = append(judge(in, r), rules...)
	if i := slices.IndexFunc(r.Verdicts, func(v Verdict) bool { return v.Field == FieldProviderID }); i >= 0 {
		switch reported, _, _ := unstructured.NestedString(r.XR.Object, "status", "outputs", "providerID"); {
		case assign != nil:
			r.Verdicts[i] = Verdict{Field: FieldProviderID, Reason: fmt.Sprintf("the %s annotation: %v", infrav1.ProviderIDAnnotation, assign)}
		case r.Verdicts[i].OK && reported == "" && in.Composition.GetAnnotations()[infrav1.ProviderIDAnnotation] != "":
			// The bridge would take the declared ID on trust; the check
			// wants the machine to say it took it.
			r.Verdicts[i] = Verdict{Field: FieldProviderID, Reason: fmt.Sprintf("declared (%s) but never reported in status.outputs.providerID", infrav1.ProviderIDAnnotation)}
		}
	}
	r.Verdicts = append(r.Verdicts, deletion(r.Last.Composed))
	if in.Contract == contractInfraMachine {
		r.Verdicts = append(r.Verdicts, inPlace(ctx, e, in, r), inPlaceBootstrap(in))
	}
	if in.CRDs != nil {
		r.Verdicts = append(r.Verdicts, validForCRDs(ctx, in.CRDs, r.Last.Composed))
	}
	return r, nil
}

// Applied is the XR as the API server would hold it after Crossplane's
// writes: the render returns only what Crossplane writes (its
// spec.crossplane fields and the status), merged here over the XR the user
// wrote.
func Applied(in, written *unstructured.Unstructured) *unstructured.Unstructured {
	xr := in.DeepCopy()
	xr.SetUID(written.GetUID())
	if st, ok := written.Object["status"]; ok {
		xr.Object["status"] = st
	}
	xp, _, _ := unstructured.NestedMap(written.Object, "spec", "crossplane")
	for k, v := range xp {
		_ = unstructured.SetNestedField(xr.Object, v, "spec", "crossplane", k)
	}
	return xr
}

// BootstrapSecret is the bootstrap provider's Secret an InfraMachine XR
// names, holding BootstrapData.
func BootstrapSecret(xr *unstructured.Unstructured) *unstructured.Unstructured {
	name, _, _ := unstructured.NestedString(xr.Object, "spec", "bootstrap", "dataSecretRef", "name")
	if name == "" {
		name = "no-bootstrap-data"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name, "namespace": xr.GetNamespace()},
		"data": map[string]any{
			"value":  base64.StdEncoding.EncodeToString([]byte(BootstrapData)),
			"format": base64.StdEncoding.EncodeToString([]byte("cloud-config")),
		},
	}}
}

// ProvideAll is the composed resources as their providers report them once
// ready (compositions.Provide), copied.
func ProvideAll(composed []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(composed))
	for _, c := range composed {
		o := c.DeepCopy()
		compositions.Provide(o)
		out = append(out, o)
	}
	return out
}

// observe is the composed resources as their providers report them: the
// given observation of a resource template, or compositions.Provide.
func observe(composed []*unstructured.Unstructured, given map[string]*unstructured.Unstructured) []*unstructured.Unstructured {
	out := ProvideAll(composed)
	for i, o := range out {
		g, ok := given[o.GetAnnotations()[compositions.AnnotationResourceName]]
		if !ok {
			continue
		}
		// The provider reports the status; the spec is what was composed.
		o = composed[i].DeepCopy()
		if st, ok := g.Object["status"]; ok {
			o.Object["status"] = st
		}
		if name, ok := g.GetAnnotations()[annotationExternalName]; ok {
			meta := o.GetAnnotations()
			if meta == nil {
				meta = map[string]string{}
			}
			meta[annotationExternalName] = name
			o.SetAnnotations(meta)
		}
		out[i] = o
	}
	return out
}

// worst keeps, per field, the first failing verdict of any round, naming
// the round.
func worst(kept, now []Verdict, round int) []Verdict {
	if kept == nil {
		return now
	}
	for i, v := range now {
		if kept[i].OK && !v.OK {
			v.Reason = fmt.Sprintf("round %d: %s", round, v.Reason)
			kept[i] = v
		}
	}
	return kept
}

// deletion: every external resource a composed resource may create, it may
// also delete, so that deleting the cluster deletes its infrastructure.
// Observe-only resources (what exists already) are left alone by design.
func deletion(composed []*unstructured.Unstructured) Verdict {
	var orphaned, observed []string
	for _, o := range composed {
		what := fmt.Sprintf("%s %s", o.GetKind(), o.GetAnnotations()[compositions.AnnotationResourceName])
		policies, found, _ := unstructured.NestedStringSlice(o.Object, "spec", "managementPolicies")
		if !found {
			policies = []string{"*"}
		}
		may := func(action string) bool { return slices.Contains(policies, "*") || slices.Contains(policies, action) }
		orphan, _, _ := unstructured.NestedString(o.Object, "spec", "deletionPolicy")
		switch {
		case !may("Create"):
			observed = append(observed, what)
		case !may("Delete") || orphan == "Orphan":
			orphaned = append(orphaned, what)
		}
	}
	if len(orphaned) > 0 {
		slices.Sort(orphaned)
		return Verdict{Field: FieldDeletion, Reason: "created but never deleted, left behind when the cluster is deleted: " + strings.Join(orphaned, ", ") +
			" (spec.managementPolicies without Delete, or spec.deletionPolicy Orphan)"}
	}
	reason := "everything created is deleted with the XR"
	if len(observed) > 0 {
		slices.Sort(observed)
		reason += "; observed only, never created or deleted: " + strings.Join(observed, ", ")
	}
	return Verdict{Field: FieldDeletion, OK: true, Reason: reason}
}

func ready(xr *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(xr.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// judge gives the verdicts of a result.
func judge(in Input, r *Result) []Verdict {
	var vs []Verdict
	if r.Err != nil {
		vs = append(vs, Verdict{Field: FieldRenders, Reason: r.Err.Error()})
	} else {
		vs = append(vs, Verdict{Field: FieldRenders, OK: true, Reason: fmt.Sprintf("%d composed resource(s), %d round(s)", len(r.Last.Composed), r.Rounds)})
	}
	if ready(r.Last.XR) {
		vs = append(vs, Verdict{Field: FieldReady, OK: true, Reason: fmt.Sprintf("Ready after %d round(s), with every composed resource reported ready", r.Rounds)})
	} else {
		vs = append(vs, Verdict{Field: FieldReady, Reason: fmt.Sprintf("not Ready after %d rounds: %s", r.Rounds, notReady(r.Last))})
	}
	switch in.Contract {
	case contractInfraCluster:
		vs = append(vs, clusterVerdicts(r.XR)...)
	case contractInfraMachine:
		vs = append(vs, machineVerdicts(r.XR)...)
	case contractMachinePool:
		vs = append(vs, machinePoolVerdicts(r.XR))
	case contractControlPlane:
		vs = append(vs, controlPlaneVerdicts(r.XR)...)
	}
	return vs
}

// notReady says why an XR is not ready: its Ready condition's message, or
// the warnings Crossplane recorded.
func notReady(out *render.Output) string {
	var why []string
	conds, _, _ := unstructured.NestedSlice(out.XR.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			w := fmt.Sprintf("Ready %v %v", m["status"], m["reason"])
			if msg, ok := m["message"].(string); ok && msg != "" {
				w += " " + msg
			}
			why = append(why, w)
		}
	}
	for _, ev := range out.Events {
		if ev.Type == "Warning" {
			why = append(why, ev.Message)
		}
	}
	if len(why) == 0 {
		return "no Ready condition"
	}
	return strings.Join(why, "; ")
}

// byPath splits the bridge's mapping errors by the contract field they are
// about.
func byPath(errs field.ErrorList, prefix string) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		if strings.HasPrefix(e.Field, prefix) {
			out = append(out, e)
		}
	}
	return out
}

func verdict(name string, errs field.ErrorList, ok string) Verdict {
	if len(errs) > 0 {
		return Verdict{Field: name, Reason: errs.ToAggregate().Error()}
	}
	return Verdict{Field: name, OK: true, Reason: ok}
}

func clusterVerdicts(xr *unstructured.Unstructured) []Verdict {
	c, errs := outputs.MapCluster(xr)
	var vs []Verdict
	endpoint := fmt.Sprintf("%s:%d", c.Endpoint.Host, c.Endpoint.Port)
	vs = append(vs, verdict(FieldEndpoint, byPath(errs, "status.outputs.controlPlaneEndpoint"), endpoint))
	fds, _, _ := unstructured.NestedSlice(xr.Object, "status", "failureDomains")
	vs = append(vs, verdict(FieldFailureDomains, byPath(errs, "status.failureDomains"), fmt.Sprintf("%d reported", len(fds))))
	if _, found, _ := unstructured.NestedMap(xr.Object, "status", "outputs", "network"); !found {
		vs = append(vs, verdict(FieldNetwork, byPath(errs, "status.outputs.network"), "none reported (optional: machines then need their own)"))
	} else {
		subnets, _, _ := unstructured.NestedSlice(xr.Object, "status", "outputs", "network", "subnets")
		vs = append(vs, verdict(FieldNetwork, byPath(errs, "status.outputs.network"), fmt.Sprintf("%d subnets", len(subnets))))
	}
	return vs
}

// controlPlaneVerdicts: the endpoint, the version the service serves, and
// the Secret of its kubeconfig, named, never the kubeconfig itself.
func controlPlaneVerdicts(xr *unstructured.Unstructured) []Verdict {
	cp, errs := outputs.MapControlPlane(xr)
	return []Verdict{
		verdict(FieldEndpoint, byPath(errs, "status.outputs.controlPlaneEndpoint"), fmt.Sprintf("%s:%d", cp.Endpoint.Host, cp.Endpoint.Port)),
		verdict(FieldVersion, byPath(errs, "status.outputs.version"), cp.Version),
		verdict(FieldKubeconfig, byPath(errs, "status.outputs.kubeconfig"), fmt.Sprintf("Secret %s, key %s", cp.Kubeconfig.Name, cp.Kubeconfig.Key)),
	}
}

// machinePoolVerdicts: the pool's machines, each a provider ID, none twice.
func machinePoolVerdicts(xr *unstructured.Unstructured) Verdict {
	mp, errs := outputs.MapMachinePool(xr)
	return verdict(FieldProviderIDList, byPath(errs, "status.outputs.providerIDList"), fmt.Sprintf("%d machine(s)", mp.Replicas()))
}

func machineVerdicts(xr *unstructured.Unstructured) []Verdict {
	m, errs := outputs.MapMachine(xr)
	var vs []Verdict
	idErrs := append(byPath(errs, "status.outputs.providerID"), byPath(errs, "spec.providerID")...)
	vs = append(vs, verdict(FieldProviderID, idErrs, m.ProviderID))
	addrs, _, _ := unstructured.NestedSlice(xr.Object, "status", "addresses")
	vs = append(vs, verdict(FieldAddresses, byPath(errs, "status.addresses"), fmt.Sprintf("%d reported", len(addrs))))
	want, _, _ := unstructured.NestedString(xr.Object, "spec", "failureDomain")
	got, _, _ := unstructured.NestedString(xr.Object, "status", "failureDomain")
	fdErrs := append(byPath(errs, "status.failureDomain"), byPath(errs, "spec.failureDomain")...)
	if len(fdErrs) == 0 && want != "" && got != want {
		fdErrs = append(fdErrs, field.Invalid(field.NewPath("status", "failureDomain"), got, "must be the failure domain CAPI chose, spec.failureDomain "+want))
	}
	vs = append(vs, verdict(FieldFailureDomain, fdErrs, fmt.Sprintf("in %q", got)))
	return vs
}

// credentials: every composed managed resource uses the XR's
// providerConfigRef (same kind and name, and a ProviderConfig of its own
// provider's group).
func credentials(xr *unstructured.Unstructured, composed []*unstructured.Unstructured) Verdict {
	kind, _, _ := unstructured.NestedString(xr.Object, "spec", "providerConfigRef", "kind")
	name, _, _ := unstructured.NestedString(xr.Object, "spec", "providerConfigRef", "name")
	group, _, _ := unstructured.NestedString(xr.Object, "spec", "providerConfigRef", "apiGroup")
	if name == "" {
		return Verdict{Field: FieldCredentials, OK: true, Reason: "the example XR names no providerConfigRef: nothing to pass through"}
	}
	var bad []string
	for _, o := range composed {
		what := fmt.Sprintf("%s %s", o.GetKind(), o.GetAnnotations()[compositions.AnnotationResourceName])
		k, _, _ := unstructured.NestedString(o.Object, "spec", "providerConfigRef", "kind")
		n, _, _ := unstructured.NestedString(o.Object, "spec", "providerConfigRef", "name")
		mrGroup := schema.FromAPIVersionAndKind(o.GetAPIVersion(), o.GetKind()).Group
		switch {
		case n == "":
			bad = append(bad, what+": no "+providerConfigRefPath+" (the provider's default credentials)")
		case k != kind || n != name:
			bad = append(bad, fmt.Sprintf("%s: %s is %s %s, want the XR's %s %s", what, providerConfigRefPath, k, n, kind, name))
		case group != "" && mrGroup != group && !strings.HasSuffix(mrGroup, "."+group):
			bad = append(bad, fmt.Sprintf("%s: a %s resource cannot use a ProviderConfig of %s", what, mrGroup, group))
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return Verdict{Field: FieldCredentials, Reason: strings.Join(bad, "; ")}
	}
	return Verdict{Field: FieldCredentials, OK: true, Reason: fmt.Sprintf("every composed resource uses %s %s", kind, name)}
}

// bootstrapByReference: no composed resource carries the bootstrap data,
// as it is or base64-encoded.
func bootstrapByReference(composed []*unstructured.Unstructured) Verdict {
	secret := []string{BootstrapData, base64.StdEncoding.EncodeToString([]byte(BootstrapData)), "capxp-check-bootstrap-data"}
	var bad []string
	for _, o := range composed {
		raw, err := json.Marshal(o.Object)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s %s: %v", o.GetKind(), o.GetName(), err))
			continue
		}
		for _, s := range secret {
			if strings.Contains(string(raw), s) || strings.Contains(string(raw), strings.ReplaceAll(s, "\n", `\n`)) {
				bad = append(bad, fmt.Sprintf("%s %s holds the bootstrap data", o.GetKind(), o.GetAnnotations()[compositions.AnnotationResourceName]))
				break
			}
		}
	}
	if len(bad) > 0 {
		return Verdict{Field: FieldBootstrapByRef, Reason: strings.Join(bad, "; ") + ": pass the Secret's name, never its content"}
	}
	return Verdict{Field: FieldBootstrapByRef, OK: true, Reason: "no composed resource holds it"}
}

// crossplaneModule is the module the crossplane binary is built from.
const crossplaneModule = "github.com/crossplane/crossplane/v2"

// Annotations of Crossplane Function objects that `crossplane render` reads:
// a function the author runs at a gRPC target.
const (
	annotationRuntime           = "render.crossplane.io/runtime"
	annotationDevelopmentTarget = "render.crossplane.io/runtime-development-target"
	runtimeDevelopment          = "Development"
)

// EngineBinaries are the paths of what StartEngine runs from d: the
// crossplane binary and each of the Configuration's functions.
func EngineBinaries(d tools.Dir) ([]string, error) {
	version, err := capxp.RequiredVersion(crossplaneModule)
	if err != nil {
		return nil, err
	}
	deps, err := packages.Dependencies("Function")
	if err != nil {
		return nil, err
	}
	var errs []error
	bins := make([]string, 0, len(deps)+1)
	crossplane, err := d.Binary("crossplane", version)
	errs = append(errs, err)
	bins = append(bins, crossplane)
	for _, dep := range deps {
		bin, err := d.Binary(dep.Name(), dep.Version)
		errs = append(errs, err)
		bins = append(bins, bin)
	}
	return bins, tools.Missing(errs...)
}

// StartEngine starts Crossplane's render engine with the crossplane binary
// and the Configuration's functions, as hack/ensure-tools.sh stages them in
// d, and the Functions given (Crossplane Function objects, as `crossplane
// render` takes them): one annotated with the Development runtime is called
// at its target, as the author runs it; another must be one of the staged
// functions' packages, named as the Composition calls it. CAPXP's own
// function (function-asg-instances) runs from the binary own, unless
// functions name it. Stop the engine when done.
func StartEngine(ctx context.Context, d tools.Dir, own string, functions ...*unstructured.Unstructured) (*render.Engine, error) {
	var errs []error
	version, err := capxp.RequiredVersion(crossplaneModule)
	if err != nil {
		return nil, err
	}
	crossplane, err := d.Binary("crossplane", version)
	if err != nil {
		errs = append(errs, err)
	}
	deps, err := packages.Dependencies("Function")
	if err != nil {
		return nil, err
	}
	byName := map[string]render.Function{}
	staged := map[string]render.Function{}
	for _, dep := range deps {
		bin, err := d.Binary(dep.Name(), dep.Version)
		if err != nil {
			errs = append(errs, err)
		}
		f := render.Function{Name: dep.FunctionName(), Binary: bin}
		byName[f.Name] = f
		staged[dep.Package] = f
	}
	for _, fn := range functions {
		if fn.GetAnnotations()[annotationRuntime] == runtimeDevelopment {
			target := fn.GetAnnotations()[annotationDevelopmentTarget]
			if target == "" {
				target = "localhost:9443"
			}
			byName[fn.GetName()] = render.Function{Name: fn.GetName(), Address: target}
			continue
		}
		pkg, _, _ := unstructured.NestedString(fn.Object, "spec", "package")
		repo, _, _ := strings.Cut(pkg, ":")
		f, ok := staged[repo]
		if !ok {
			errs = append(errs, errors.Errorf("Function %s (package %s) is not one the tools directory stages: run it yourself and annotate it %s: %s (and %s)",
				fn.GetName(), pkg, annotationRuntime, runtimeDevelopment, annotationDevelopmentTarget))
			continue
		}
		byName[fn.GetName()] = render.Function{Name: fn.GetName(), Binary: f.Binary}
	}
	if err := tools.Missing(errs...); err != nil {
		return nil, err
	}
	if _, ok := byName[release.DefaultFunctionName]; !ok {
		if own == "" {
			return nil, errors.Errorf("CAPXP's composition function %s has no binary: build it (go build ./cmd/function-asg-instances; a release has it in out/bin) and name it with --function-asg-instances, or run it yourself and name it in --functions with the %s runtime",
				release.FunctionPackageName, runtimeDevelopment)
		}
		byName[release.DefaultFunctionName] = render.Function{Name: release.DefaultFunctionName, Binary: own}
	}
	fns := make([]render.Function, 0, len(byName))
	for _, f := range byName {
		fns = append(fns, f)
	}
	slices.SortFunc(fns, func(a, b render.Function) int { return strings.Compare(a.Name, b.Name) })
	return render.Start(ctx, crossplane, fns...)
}
