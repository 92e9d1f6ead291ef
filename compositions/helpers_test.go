package compositions_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	"github.com/capxp/cluster-api-provider-crossplane/compositions"
	"github.com/capxp/cluster-api-provider-crossplane/test/render"
)

// annotationTemplate is where Crossplane records which resource template of
// the Composition produced a composed resource.
const annotationTemplate = "crossplane.io/composition-resource-name"

// converged is a Composition driven to readiness.
type converged struct {
	first, last *render.Output
	// composed are the last observed composed resources (with the simulated
	// providers' status), by resource template name.
	composed map[string]*unstructured.Unstructured
	// input is the XR the case started from.
	input *unstructured.Unstructured
}

// converge renders a case round after round, feeding back the composed
// resources as their providers would observe them, until the XR is ready.
// Every round's output is checked for the security rules.
func converge(t *testing.T, tc contractCase) converged {
	t.Helper()
	ctx := t.Context()
	comp := must(compositions.Read(tc.composition))
	in := testdata(t, tc.xr)
	xr := in.DeepCopy()
	extra := []*unstructured.Unstructured{bootstrapSecret(in)}
	var observed []*unstructured.Unstructured
	c := converged{input: in}
	for round := 1; round <= maxRounds; round++ {
		out, err := engine.Render(ctx, render.Input{XR: xr, Composition: comp, XRD: xrd(t, xr), Observed: observed, Extra: extra})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if c.first == nil {
			c.first = out
		}
		c.last = out
		checkSecurityRules(t, in, out)
		if ready := condition(out.XR, "Ready"); ready["status"] == "True" {
			// Warnings while resources wait for each other are expected;
			// once ready there must be none.
			for _, ev := range out.Events {
				if ev.Type == "Warning" {
					t.Errorf("round %d: warning event %s: %s", round, ev.Reason, ev.Message)
				}
			}
			c.composed = byTemplate(observed)
			checkSelectors(t, out.Composed)
			return c
		}
		xr, observed = applied(in, out.XR), provide(out.Composed)
	}
	t.Fatalf("the XR is not ready after %d rounds: conditions %v, events %+v", maxRounds, c.last.XR.Object["status"], c.last.Events)
	return c
}

// applied is the XR as the API server would hold it after Crossplane's
// writes: the render returns only what Crossplane writes (its spec.crossplane
// fields and the status), merged here over the XR the user wrote.
func applied(in, written *unstructured.Unstructured) *unstructured.Unstructured {
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

// bootstrapSecret is the bootstrap provider's Secret the XR names, holding
// bootstrapData, or nil for XRs without one.
func bootstrapSecret(xr *unstructured.Unstructured) *unstructured.Unstructured {
	name, _, _ := unstructured.NestedString(xr.Object, "spec", "bootstrap", "dataSecretRef", "name")
	if name == "" {
		name = "no-bootstrap-data"
	}
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: xr.GetNamespace()},
		Data:       map[string][]byte{"value": []byte(bootstrapData), "format": []byte("cloud-config")},
	}
	o, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: o}
}

// checkSecurityRules: no composed resource carries the bootstrap data, and
// every one uses the XR's credentials.
func checkSecurityRules(t *testing.T, in *unstructured.Unstructured, out *render.Output) {
	t.Helper()
	secret := []string{bootstrapData, base64.StdEncoding.EncodeToString([]byte(bootstrapData)), "capxp-test-bootstrap-token"}
	kind, _, _ := unstructured.NestedString(in.Object, "spec", "providerConfigRef", "kind")
	name, _, _ := unstructured.NestedString(in.Object, "spec", "providerConfigRef", "name")
	for _, o := range append([]*unstructured.Unstructured{out.XR}, out.Composed...) {
		raw, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secret {
			if strings.Contains(string(raw), s) || strings.Contains(string(raw), strings.ReplaceAll(s, "\n", `\n`)) {
				t.Errorf("%s %s carries the bootstrap data", o.GetKind(), o.GetName())
			}
		}
		if o == out.XR {
			continue
		}
		ref, _, _ := unstructured.NestedStringMap(o.Object, "spec", "providerConfigRef")
		if ref["kind"] != kind || ref["name"] != name {
			t.Errorf("%s %s uses credentials %v, want the XR's %s %s", o.GetKind(), o.GetAnnotations()[annotationTemplate], ref, kind, name)
		}
	}
}

// checkSelectors: every selector that picks a sibling composed resource
// matches at least one, so a label typo cannot leave a reference unresolved.
func checkSelectors(t *testing.T, composed []*unstructured.Unstructured) {
	t.Helper()
	var walk func(path string, v any, owner *unstructured.Unstructured)
	walk = func(path string, v any, owner *unstructured.Unstructured) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				sel, isMap := c.(map[string]any)
				if strings.HasSuffix(k, "Selector") && isMap && sel["matchControllerRef"] == true {
					labels := map[string]string{}
					ml, _ := sel["matchLabels"].(map[string]any)
					for lk, lv := range ml {
						labels[lk], _ = lv.(string)
					}
					found := false
					for _, o := range composed {
						found = found || (o != owner && matches(o.GetLabels(), labels))
					}
					if !found {
						t.Errorf("%s %s.%s matches no composed resource: %v", owner.GetKind(), path, k, labels)
					}
					continue
				}
				walk(path+"."+k, c, owner)
			}
		case []any:
			for i, c := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), c, owner)
			}
		}
	}
	for _, o := range composed {
		walk("spec", o.Object["spec"], o)
	}
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// provide plays the providers: every composed resource comes back ready,
// with the status its provider would report.
func provide(composed []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(composed))
	for _, c := range composed {
		o := c.DeepCopy()
		p := fieldpath.Pave(o.Object)
		fp := func(f string) string { s, _ := p.GetString("spec.forProvider." + f); return s }
		region := fp("region")
		h := hash(o.GetAnnotations()[annotationTemplate] + "/" + o.GetName())
		at := map[string]any{"id": h[:8]}
		arn := func(svc, res string) string {
			return fmt.Sprintf("arn:aws:%s:%s:123456789012:%s", svc, region, res)
		}
		switch o.GetKind() {
		case "VPC":
			at = map[string]any{"id": "vpc-" + h, "cidrBlock": fp("cidrBlock"), "arn": arn("ec2", "vpc/vpc-"+h)}
		case "Subnet":
			at = map[string]any{"id": "subnet-" + h, "cidrBlock": fp("cidrBlock"), "availabilityZone": fp("availabilityZone"), "arn": arn("ec2", "subnet/subnet-"+h)}
		case "InternetGateway":
			at = map[string]any{"id": "igw-" + h}
		case "EIP":
			at = map[string]any{"id": "eipalloc-" + h, "allocationId": "eipalloc-" + h, "publicIp": "203.0.113.7"}
		case "NATGateway":
			at = map[string]any{"id": "nat-" + h}
		case "RouteTable":
			at = map[string]any{"id": "rtb-" + h}
		case "RouteTableAssociation":
			at = map[string]any{"id": "rtbassoc-" + h}
		case "SecurityGroup":
			at = map[string]any{"id": "sg-" + h, "arn": arn("ec2", "security-group/sg-"+h)}
		case "SecurityGroupIngressRule", "SecurityGroupEgressRule":
			at = map[string]any{"id": "sgr-" + h}
		case "LB":
			a := arn("elasticloadbalancing", "loadbalancer/net/capxp-"+h[:8]+"/"+h)
			at = map[string]any{"id": a, "arn": a, "dnsName": fmt.Sprintf("capxp-%s-%s.elb.%s.amazonaws.com", h[:8], h[8:], region)}
		case "LBTargetGroup":
			a := arn("elasticloadbalancing", "targetgroup/capxp-"+h[:8]+"/"+h)
			at = map[string]any{"id": a, "arn": a}
		case "LBListener":
			a := arn("elasticloadbalancing", "listener/net/capxp/"+h)
			port, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "forProvider", "port")
			at = map[string]any{"id": a, "arn": a, "port": port, "protocol": fp("protocol")}
		case "Secret":
			a := arn("secretsmanager", "secret:"+fp("name")+"-"+h[:6])
			at = map[string]any{"id": a, "arn": a}
		case "SecretVersion":
			at = map[string]any{"id": "version-" + h, "versionId": "version-" + h}
		case "Instance":
			ip := fmt.Sprintf("10.20.%d.%d", 64+int(h[0])%64, 10+int(h[1])%200)
			at = map[string]any{
				"id": "i-" + h[:17], "availabilityZone": fp("availabilityZone"), "privateIp": ip,
				"privateDns": "ip-" + strings.ReplaceAll(ip, ".", "-") + "." + region + ".compute.internal",
				"arn":        arn("ec2", "instance/i-"+h[:17]),
			}
		case "Object":
			m, _, _ := unstructured.NestedMap(o.Object, "spec", "forProvider", "manifest")
			obs := &unstructured.Unstructured{Object: m}
			obs.SetUID(types.UID("00000000-0000-0000-0000-" + h[:12]))
			obs.SetResourceVersion("42")
			if obs.GetKind() == "EndpointSlice" {
				obs.Object["addressType"] = "IPv4"
				obs.Object["endpoints"] = []any{map[string]any{"addresses": []any{"127.0.0.1"}, "conditions": map[string]any{"ready": true}}}
				obs.Object["ports"] = []any{map[string]any{"name": "https", "port": int64(36443), "protocol": "TCP"}}
			}
			at = map[string]any{"manifest": obs.Object}
		}
		_ = p.SetValue("status.atProvider", at)
		_ = p.SetValue("status.conditions", []any{
			map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2026-11-21T00:00:00Z"},
			map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "lastTransitionTime": "2026-11-21T00:00:00Z"},
		})
		out = append(out, o)
	}
	return out
}

// hash is a stable 17-hex-digit ID for a composed resource.
func hash(s string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%017x", h.Sum64())[:17]
}

var nsOnce sync.Map

// validate submits every composed resource of the last round to the API
// server holding the providers' CRDs (dry run, strict field validation), so
// a misspelt field or a broken CEL rule fails, and does the same with the
// XR's spec and status against the XRD's CRD.
func validate(t *testing.T, c converged) {
	t.Helper()
	ctx := t.Context()
	ns := c.input.GetNamespace()
	if _, loaded := nsOnce.LoadOrStore(ns, true); !loaded {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	strict := client.FieldValidation("Strict")
	for _, o := range c.last.Composed {
		o = o.DeepCopy()
		if o.GetName() == "" {
			o.SetName("validate-" + hash(o.GetAnnotations()[annotationTemplate]))
		}
		if err := env.Client.Create(ctx, o, client.DryRunAll, strict); err != nil {
			t.Errorf("composed resource %q (%s) is invalid: %v", o.GetAnnotations()[annotationTemplate], o.GetKind(), err)
		}
	}

	// The XR: created as the user wrote it, then updated (dry run) with
	// everything Crossplane and the Composition wrote.
	xr := c.input.DeepCopy()
	xr.SetName(xr.GetName() + "-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))[len("testcompositions-"):])
	if err := env.Client.Create(ctx, xr, strict); err != nil {
		t.Fatalf("cannot create the input XR: %v", err)
	}
	rendered := applied(c.input, c.last.XR)
	rendered.SetName(xr.GetName())
	rendered.SetUID(xr.GetUID())
	rendered.SetResourceVersion(xr.GetResourceVersion())
	if err := env.Client.Update(ctx, rendered, client.DryRunAll, strict); err != nil {
		t.Errorf("the rendered XR's spec is invalid: %v", err)
	}
	if err := env.Client.Status().Update(ctx, rendered, client.DryRunAll, strict); err != nil {
		t.Errorf("the status the Composition wrote is invalid: %v", err)
	}
}

// golden compares the first render with testdata/golden/<name>.yaml.
func golden(t *testing.T, name string, out *render.Output) {
	t.Helper()
	xr := out.XR.DeepCopy()
	conds, _, _ := unstructured.NestedSlice(xr.Object, "status", "conditions")
	for _, c := range conds {
		delete(c.(map[string]any), "lastTransitionTime") // the time of the run
	}
	if conds != nil {
		_ = unstructured.SetNestedSlice(xr.Object, conds, "status", "conditions")
	}
	docs := []any{xr.Object}
	composed := append([]*unstructured.Unstructured(nil), out.Composed...)
	sort.Slice(composed, func(i, j int) bool {
		return composed[i].GetAnnotations()[annotationTemplate] < composed[j].GetAnnotations()[annotationTemplate]
	})
	for _, c := range composed {
		docs = append(docs, c.Object)
	}
	var b strings.Builder
	b.WriteString("# The first render of a Composition; regenerate with\n# go test ./compositions -run TestCompositions -update\n")
	for _, d := range docs {
		raw, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(raw)
	}
	file := filepath.Join("testdata", "golden", name+".yaml")
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), b.String()); diff != "" {
		t.Errorf("first render differs from %s (-want +got; run with -update if intended):\n%s", file, diff)
	}
}

func byTemplate(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		out[o.GetAnnotations()[annotationTemplate]] = o
	}
	return out
}

func condition(o *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return map[string]any{}
}

func hasEvent(events []render.Event, typ, substr string) bool {
	for _, e := range events {
		if e.Type == typ && strings.Contains(e.Message, substr) {
			return true
		}
	}
	return false
}

func testdata(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// xrd is the shipped XRD of an XR's kind.
func xrd(t *testing.T, xr *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	x, err := compositions.Read("xrds/" + strings.ToLower(xr.GetKind()) + "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// str reads a string field; a missing one fails the test.
func str(t *testing.T, o *unstructured.Unstructured, path string) string {
	t.Helper()
	if o == nil {
		t.Fatalf("no object to read %s from", path)
	}
	s, err := fieldpath.Pave(o.Object).GetString(path)
	if err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return s
}

// assertFields compares fields of an object; numbers compare as int64.
func assertFields(t *testing.T, o *unstructured.Unstructured, want map[string]any) {
	t.Helper()
	p := fieldpath.Pave(o.Object)
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		got, err := p.GetValue(k)
		if err != nil {
			t.Errorf("%s %s: %s: %v", o.GetKind(), o.GetName(), k, err)
			continue
		}
		if f, ok := got.(float64); ok {
			got = int64(f)
		}
		if got != want[k] {
			t.Errorf("%s %s: %s = %v (%T), want %v (%T)", o.GetKind(), o.GetName(), k, got, got, want[k], want[k])
		}
	}
}

func assertLen(t *testing.T, o *unstructured.Unstructured, path string, n int) {
	t.Helper()
	v, err := fieldpath.Pave(o.Object).GetValue(path)
	l, ok := v.([]any)
	if err != nil || !ok || len(l) != n {
		t.Errorf("%s: want a list of %d, got %v (%v)", path, n, v, err)
	}
}
