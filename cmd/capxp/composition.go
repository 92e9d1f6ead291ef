package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/xrd"
	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/internal/compcheck"
	"github.com/capxp/cluster-api-provider-crossplane/internal/release/cliarchive"
	"github.com/capxp/cluster-api-provider-crossplane/internal/tools"
)

const compositionUsage = `Usage: capxp composition check COMPOSITION [--xr EXAMPLE_XR] [--xrd XRD] [--crds DIR,...] [--observed DIR] [--functions FUNCTIONS.yaml] [--function-asg-instances BINARY] [--tools-dir DIR] [--timeout D] [-o text|json]

Checks a Composition against the CAPI contract of its XR's kind
(InfraCluster, InfraMachine, InfraMachinePool or ControlPlane), offline:
it renders the example XR with Crossplane's render engine and the
Configuration's functions, reports every composed resource ready as its
provider would, round after round until the XR is ready, and gives a verdict
per contract field, and checks every composed resource against its kind's
CRD as the API server would (strict: unknown fields, schema, CEL rules).
--observed names a directory of composed resources as their providers
reported them (YAML, each with its crossplane.io/composition-resource-name
annotation): their status stands for those resources in every round.
--functions names Crossplane Function objects, as crossplane render takes
them: one annotated render.crossplane.io/runtime: Development is called at
its render.crossplane.io/runtime-development-target; another must be one of
the Configuration's functions, staged in the tools directory. CAPXP's own
function, function-asg-instances, runs from --function-asg-instances: by
default the binary beside capxp (a release's out/bin holds both), or the
one on $PATH.
Exit status: 0 when every field holds, 1 when one does not or rendering
failed, 2 for bad input (a flag; a file, tool or function binary that is
missing or is not what it should be).

The example XR defaults to CAPXP's shipped example for its own Compositions,
and is otherwise generated from the XRD's schema (a starting point: give a
real one with --xr). The XRD defaults to CAPXP's own for the Composition's compositeTypeRef; a
platform team's XRD must declare its contract with the label
capxp.dev/contract. The CRDs default to those of the Configuration's
providers that the Composition composes with. The crossplane binary, the
functions and the providers' CRDs come from the tools directory:
$CAPXP_TOOLS_CACHE, else the tools folder beside capxp (the release's
capxp-VERSION-linux-ARCH.tar.gz holds them all), else a checkout's
.cache/tools, which hack/ensure-tools.sh fills.
`

// runComposition runs `capxp composition SUBCOMMAND`; it returns the exit
// status.
func runComposition(args []string, stdout, stderr io.Writer) int {
	fs, c, rest, status, ok := subcommand("capxp composition", args, "check", compositionUsage, stdout, stderr)
	if !ok {
		return status
	}
	xrPath := fs.String("xr", "", "an example XR of the Composition's kind (YAML); CAPXP's shipped one, or one generated from the XRD, by default")
	xrdPath := fs.String("xrd", "", "the XRD the Composition is for (YAML); CAPXP's own by default")
	toolsDir := fs.String("tools-dir", string(defaultToolsDir()), "where the crossplane binary, the functions and the providers' CRDs are, as hack/ensure-tools.sh stages them")
	output := fs.String("o", "text", "output format: text or json")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long the check may take")
	observedDir := fs.String("observed", "", "a directory of observed composed resources (YAML); the others are reported ready as their providers would")
	functionsPath := fs.String("functions", "", "Crossplane Function objects (YAML) for functions the Configuration does not pin, or that you run yourself")
	crdDirs := fs.String("crds", "", "comma-separated CRD files or directories of the composed kinds; the Configuration's providers' by default")
	ownFunction := fs.String("function-asg-instances", ownFunctionBinary(), "CAPXP's function-asg-instances binary; the one beside capxp, or on $PATH, by default")
	// The Composition may come before the flags, as in the usage line.
	compPath, status, ok := c.parseOne(fs, rest, "Composition file")
	if !ok {
		return status
	}
	if err := oneOf("-o", *output, "text", outputJSON); err != nil {
		return c.usageError("%v", err)
	}
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	r, in, err := checkComposition(ctx, compPath, *xrPath, *xrdPath, *crdDirs, *observedDir, *functionsPath, *ownFunction, tools.Dir(*toolsDir))
	if err != nil {
		return c.outcome(err)
	}
	took := time.Since(started).Round(10 * time.Millisecond)
	if *output == outputJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Composition string              `json:"composition"`
			Contract    string              `json:"contract"`
			Example     string              `json:"example"`
			OK          bool                `json:"ok"`
			Rounds      int                 `json:"rounds"`
			Seconds     float64             `json:"seconds"`
			Verdicts    []compcheck.Verdict `json:"verdicts"`
		}{in.Composition.GetName(), in.Contract, in.Example, r.OK(), r.Rounds, took.Seconds(), r.Verdicts}); err != nil {
			return c.failed(err)
		}
	} else {
		fmt.Fprintf(stdout, "Composition %s (%s contract), example XR %s, %d round(s), %s:\n", in.Composition.GetName(), in.Contract, in.Example, r.Rounds, took)
		for _, v := range r.Verdicts {
			mark := "✓"
			if !v.OK {
				mark = "✗"
			}
			fmt.Fprintf(stdout, "  %s %s: %s\n", mark, v.Field, v.Reason)
		}
	}
	if !r.OK() {
		return exitFailed
	}
	return exitOK
}

func checkComposition(ctx context.Context, compPath, xrPath, xrdPath, crdPaths, observedDir, functionsPath, ownFunction string, d tools.Dir) (*compcheck.Result, compcheck.Input, error) {
	var in compcheck.Input
	var err error
	if in.Composition, err = readObject(compPath, "Composition"); err != nil {
		return nil, in, inputError{err}
	}
	if xrdPath != "" {
		if in.XRD, err = readObject(xrdPath, "CompositeResourceDefinition"); err != nil {
			return nil, in, inputError{err}
		}
	} else if in.XRD, err = ownXRD(in.Composition); err != nil {
		return nil, in, inputError{err}
	}
	switch {
	case xrPath != "":
		in.XR, err = readObject(xrPath, "")
		in.Example = xrPath
	case xrdPath == "":
		in.XR, err = compositions.Example(in.Composition)
		in.Example = "CAPXP's shipped example"
	default:
		in.XR, err = compcheck.ExampleFromXRD(in.XRD, in.Composition)
		in.Example = "generated from the XRD's schema"
	}
	if err != nil {
		return nil, in, inputError{err}
	}
	in.Contract = in.XRD.GetLabels()[infrav1.ContractLabel]
	if !slices.Contains(xrd.Contracts, in.Contract) {
		return nil, in, inputError{errors.Errorf("XRD %s: metadata.labels[%s] is %q: it must declare the contract, one of %s",
			in.XRD.GetName(), infrav1.ContractLabel, in.Contract, strings.Join(xrd.Contracts, ", "))}
	}
	if observedDir != "" {
		if in.Observed, err = readObserved(observedDir); err != nil {
			return nil, in, inputError{err}
		}
	}
	if crdPaths != "" {
		if in.CRDs, err = compcheck.LoadCRDs(strings.Split(crdPaths, ",")...); err != nil {
			return nil, in, inputError{errors.Wrap(err, "--crds")}
		}
	} else if in.CRDs, err = compcheck.ProviderCRDs(d); err != nil {
		return nil, in, inputError{err}
	}
	var functions []*unstructured.Unstructured
	if functionsPath != "" {
		if functions, err = readFunctions(functionsPath); err != nil {
			return nil, in, inputError{err}
		}
	}
	// The engine's binaries are what --tools-dir, --functions and
	// --function-asg-instances name.
	e, err := compcheck.StartEngine(ctx, d, ownFunction, functions...)
	if err != nil {
		return nil, in, inputError{err}
	}
	defer e.Stop() //nolint:errcheck // best effort: the functions are this process's children.
	r, err := compcheck.Check(ctx, e, in)
	return r, in, err
}

// defaultToolsDir is $CAPXP_TOOLS_CACHE when set, else the tools folder
// beside this binary, as the release's command-line archive holds it, else
// the checkout's .cache/tools.
func defaultToolsDir() tools.Dir {
	if os.Getenv(tools.EnvDir) == "" {
		if self, err := os.Executable(); err == nil {
			dir := filepath.Join(filepath.Dir(self), cliarchive.ToolsDir)
			if st, err := os.Stat(dir); err == nil && st.IsDir() {
				return tools.Dir(dir)
			}
		}
	}
	return tools.Default()
}

// ownFunctionBinary is function-asg-instances beside this binary, as a
// release and `make build` put them, or on $PATH; "" when neither exists.
func ownFunctionBinary() string {
	const name = "function-asg-instances"
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return ""
}

// readObject reads one YAML object, of kind when kind is not empty.
func readObject(path, kind string) (*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.Wrap(err, "cannot read")
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		return nil, errors.Wrapf(err, "%s: cannot decode YAML", path)
	}
	if kind != "" && u.GetKind() != kind {
		return nil, errors.Errorf("%s: kind is %q, want %s", path, u.GetKind(), kind)
	}
	return u, nil
}

// ownXRD is CAPXP's XRD for the Composition's compositeTypeRef.
func ownXRD(comp *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	apiVersion, _, _ := unstructured.NestedString(comp.Object, "spec", "compositeTypeRef", "apiVersion")
	kind, _, _ := unstructured.NestedString(comp.Object, "spec", "compositeTypeRef", "kind")
	xrds, err := compositions.ReadDir("xrds")
	if err != nil {
		return nil, err
	}
	for _, x := range xrds {
		group, _, _ := unstructured.NestedString(x.Object, "spec", "group")
		k, _, _ := unstructured.NestedString(x.Object, "spec", "names", "kind")
		if k == kind && len(apiVersion) > len(group) && apiVersion[:len(group)+1] == group+"/" {
			return x, nil
		}
	}
	return nil, errors.Errorf("composition %s composes %s %s, which is not one of CAPXP's kinds: name its XRD with --xrd", comp.GetName(), apiVersion, kind)
}

// readObserved reads the observed composed resources of a directory, by
// their resource template's name.
func readObserved(dir string) (map[string]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, errors.Wrapf(err, "cannot list %s", dir)
	}
	if len(files) == 0 {
		return nil, errors.Errorf("--observed %s holds no *.yaml file", dir)
	}
	out := map[string]*unstructured.Unstructured{}
	for _, f := range files {
		o, err := readObject(f, "")
		if err != nil {
			return nil, err
		}
		name := o.GetAnnotations()[compositions.AnnotationResourceName]
		if name == "" {
			return nil, errors.Errorf("%s: metadata.annotations[%s] is missing: it names the Composition's resource template the object was composed from", f, compositions.AnnotationResourceName)
		}
		out[name] = o
	}
	return out, nil
}

// readFunctions reads the Function objects of a YAML stream.
func readFunctions(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errors.Wrap(err, "cannot read")
	}
	defer f.Close()
	d := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := d.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, errors.Wrapf(err, "%s: cannot decode YAML", path)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetKind() != "Function" {
			return nil, errors.Errorf("%s: %s %s is not a Function", path, u.GetKind(), u.GetName())
		}
		out = append(out, u)
	}
	return out, nil
}
