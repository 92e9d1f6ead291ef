package controllers

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
)

func TestStripManagedFields(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "crossplane", Operation: metav1.ManagedFieldsOperationApply}}
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "a", "managedFields": []any{map[string]any{"manager": "crossplane"}}}}}
	typed := &metav1.ObjectMeta{Name: "b", ManagedFields: managed}
	cases := map[string]struct {
		in    any
		check func(t *testing.T, out any)
	}{
		"Unstructured": {in: u, check: func(t *testing.T, out any) {
			t.Helper()
			if got := out.(*unstructured.Unstructured); got.GetManagedFields() != nil || got.GetName() != "a" {
				t.Errorf("managed fields %v, name %q", got.GetManagedFields(), got.GetName())
			}
		}},
		"XR": {in: &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "x", "managedFields": []any{}, "annotations": map[string]any{
				"kubectl.kubernetes.io/last-applied-configuration": `{"spec":{}}`, "crossplane.io/paused": "true"}},
			"spec": map[string]any{"providerID": "p"},
			"status": map[string]any{"ready": true, "conditions": []any{
				map[string]any{"type": "Responsive", "status": "True"},
				map[string]any{"type": "Synced", "status": "True"},
				map[string]any{"type": "Custom", "status": "False"},
				map[string]any{"type": "Ready", "status": "False", "message": "Unready resources: node"},
			}},
		}}, check: func(t *testing.T, out any) {
			t.Helper()
			want := map[string]any{
				"metadata": map[string]any{"name": "x", "annotations": map[string]any{"crossplane.io/paused": "true"}},
				"spec":     map[string]any{"providerID": "p"},
				"status": map[string]any{"ready": true, "conditions": []any{
					map[string]any{"type": "Synced", "status": "True"},
					map[string]any{"type": "Ready", "status": "False", "message": "Unready resources: node"},
				}},
			}
			if diff := cmp.Diff(want, out.(*unstructured.Unstructured).Object); diff != "" {
				t.Errorf("an XR keeps what the bridge reads: -want, +got:\n%s", diff)
			}
		}},
		"Typed": {in: typed, check: func(t *testing.T, out any) {
			t.Helper()
			if got := out.(*metav1.ObjectMeta); got.ManagedFields != nil || got.Name != "b" {
				t.Errorf("managed fields %v, name %q", got.ManagedFields, got.Name)
			}
		}},
		"Other": {in: "tombstone", check: func(t *testing.T, out any) {
			t.Helper()
			if out != "tombstone" {
				t.Errorf("got %v", out)
			}
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := stripManagedFields(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, out)
		})
	}
}

func TestSlimMachine(t *testing.T) {
	verdict := metav1.Condition{Type: infrav1.CrossplaneInfrastructureReadyCondition, Status: metav1.ConditionFalse, Reason: infrav1.InvalidOutputsReason}
	machine := func(conds ...metav1.Condition) *clusterv1.Machine {
		return &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: "m", Generation: 3, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "capi"}}},
			Spec:       clusterv1.MachineSpec{ClusterName: "c", ProviderID: "aws:///i-1"},
			Status: clusterv1.MachineStatus{
				Conditions: conds,
				Addresses:  clusterv1.MachineAddresses{{Type: clusterv1.MachineInternalIP, Address: "10.0.0.1"}},
				Phase:      "Running",
			},
		}
	}
	ready := metav1.Condition{Type: clusterv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready"}
	cases := map[string]struct {
		in   *clusterv1.Machine
		want clusterv1.MachineStatus
	}{
		"KeepsTheVerdict": {in: machine(ready, verdict), want: clusterv1.MachineStatus{Conditions: []metav1.Condition{verdict}}},
		"NoVerdict":       {in: machine(ready), want: clusterv1.MachineStatus{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := slimMachine(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			m := out.(*clusterv1.Machine)
			if diff := cmp.Diff(tc.want, m.Status); diff != "" {
				t.Errorf("status -want +got:\n%s", diff)
			}
			if m.ManagedFields != nil || m.Spec.ProviderID != "aws:///i-1" || m.Generation != 3 {
				t.Errorf("metadata or spec changed: %+v", m.ObjectMeta)
			}
		})
	}
}

func TestInterned(t *testing.T) {
	decode := func() map[string]any {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(`{"apiVersion":"v1","kind":"X","metadata":{"name":"a","labels":{"cluster.x-k8s.io/cluster-name":"demo"}},"status":{"conditions":[{"type":"Ready","status":"True","message":"` + strings.Repeat("m", internMax+1) + `"}]}}`)); err != nil {
			t.Fatal(err)
		}
		return u.Object
	}
	a, b := interned(decode()).(map[string]any), interned(decode()).(map[string]any)
	if diff := cmp.Diff(decode(), a); diff != "" {
		t.Errorf("interned(...) changed the object: -want, +got:\n%s", diff)
	}
	labelKey := func(m map[string]any) string {
		for k := range m["metadata"].(map[string]any)["labels"].(map[string]any) {
			return k
		}
		return ""
	}
	condition := func(m map[string]any, f string) string {
		return m["status"].(map[string]any)["conditions"].([]any)[0].(map[string]any)[f].(string)
	}
	cases := map[string]struct {
		a, b   string
		shared bool
	}{
		"MapKey":     {a: labelKey(a), b: labelKey(b), shared: true},
		"ShortValue": {a: condition(a, "status"), b: condition(b, "status"), shared: true},
		"LongValue":  {a: condition(a, "message"), b: condition(b, "message"), shared: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := unsafe.StringData(tc.a) == unsafe.StringData(tc.b); got != tc.shared {
				t.Errorf("two decodings share %q: %v, want %v", tc.a, got, tc.shared)
			}
		})
	}
}

// countingMapper counts the lookups that reach the mapper behind.
type countingMapper struct {
	meta.RESTMapper
	lookups int
	// during, when set, runs while a lookup is under way.
	during func()
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.lookups++
	if c.during != nil {
		c.during()
	}
	return c.RESTMapper.RESTMapping(gk, versions...)
}

func (c *countingMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	c.lookups++
	if c.during != nil {
		c.during()
	}
	return c.RESTMapper.RESTMappings(gk, versions...)
}

func TestRESTMapperRemembersAnswers(t *testing.T) {
	served := schema.GroupKind{Group: "example.org", Kind: "Served"}
	missing := schema.GroupKind{Group: "aws.m.upbound.io", Kind: "ProviderConfig"}
	// Each step is one lookup, after advancing the clock (or forgetting).
	type step struct {
		after  time.Duration
		forget bool
		// forgetDuring: a CRD changes while the mapper behind is asked.
		forgetDuring bool
		gk           schema.GroupKind
		all          bool
		// reached: the lookup reached the mapper behind.
		reached bool
	}
	cases := map[string][]step{
		"A served kind is answered from memory within its TTL": {
			{gk: served, reached: true}, {after: hitTTL / 2, gk: served}, {gk: served, all: true, reached: true}, {gk: served, all: true},
		},
		"A served kind is looked up again after its TTL": {
			{gk: served, reached: true}, {after: hitTTL, gk: served, reached: true},
		},
		"A kind not served is answered from memory within its TTL": {
			{gk: missing, reached: true}, {after: missTTL / 2, gk: missing}, {gk: missing, all: true, reached: true}, {gk: missing, all: true},
		},
		"A kind not served is looked up again after its TTL": {
			{gk: missing, reached: true}, {after: missTTL, gk: missing, reached: true}, {gk: missing},
		},
		"An answer asked for before a CRD changed is not remembered": {
			{forgetDuring: true, gk: missing, reached: true}, {gk: missing, reached: true}, {gk: missing},
		},
		"A changed CRD forgets every answer": {
			{gk: missing, reached: true}, {gk: served, reached: true}, {forget: true, gk: missing, reached: true}, {gk: served, reached: true},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			behind := meta.NewDefaultRESTMapper([]schema.GroupVersion{served.WithVersion("v1").GroupVersion()})
			behind.Add(served.WithVersion("v1"), meta.RESTScopeNamespace)
			c := &countingMapper{RESTMapper: behind}
			now := time.Unix(0, 0)
			m := &restMapper{RESTMapper: c, answers: map[string]answer{}, now: func() time.Time { return now }}
			for i, s := range steps {
				now = now.Add(s.after)
				if s.forget {
					m.forget()
				}
				c.during = nil
				if s.forgetDuring {
					c.during = m.forget
				}
				before := c.lookups
				var err error
				var found bool
				if s.all {
					var r []*meta.RESTMapping
					r, err = m.RESTMappings(s.gk)
					found = len(r) == 1 && r[0].Resource.Resource == "serveds"
				} else {
					var r *meta.RESTMapping
					r, err = m.RESTMapping(s.gk)
					found = r != nil && r.Resource.Resource == "serveds"
				}
				if got := c.lookups > before; got != s.reached {
					t.Errorf("step %d: reached the mapper behind: %t, want %t", i, got, s.reached)
				}
				if wantMiss := s.gk == missing; meta.IsNoMatchError(err) != wantMiss || found == wantMiss {
					t.Errorf("step %d: found %t, error %v; want a miss: %t", i, found, err, wantMiss)
				}
			}
		})
	}
}

func TestRESTMapperMemoryIsBounded(t *testing.T) {
	m := &restMapper{RESTMapper: meta.NewDefaultRESTMapper(nil), answers: map[string]answer{}, now: time.Now}
	for i := range maxAnswers + 10 {
		_, err := m.RESTMapping(schema.GroupKind{Group: "tenant.example.org", Kind: fmt.Sprintf("Kind%d", i)})
		if !meta.IsNoMatchError(err) {
			t.Fatalf("lookup %d: %v, want a miss", i, err)
		}
		if len(m.answers) > maxAnswers {
			t.Fatalf("after %d lookups of distinct kinds: %d answers remembered, want at most %d", i+1, len(m.answers), maxAnswers)
		}
	}
}

// Kinds a tenant makes up (its XRs' resourceRefs name any group and kind)
// never reach the mapper behind, which would read the API server's whole
// discovery for each: discovery is read at most once in missTTL, and again
// at once after a CRD changed.
func TestRESTMapperReadsDiscoveryOnceForMadeUpKinds(t *testing.T) {
	served := schema.GroupKind{Group: "example.org", Kind: "Served"}
	later := schema.GroupKind{Group: "example.org", Kind: "Later"}
	cases := map[string]struct {
		// lookups of made-up kinds, then of want, after advancing the clock
		// by after (and forgetting).
		madeUp   int
		after    time.Duration
		forget   bool
		install  bool
		want     schema.GroupKind
		found    bool
		readings int
		reached  int
	}{
		"thousands of made-up kinds: one reading, none reaches the mapper behind": {
			madeUp: 2000, want: served, found: true, readings: 1, reached: 1,
		},
		"made-up kinds again after missTTL: a second reading": {
			madeUp: 10, after: missTTL, want: schema.GroupKind{Group: "x.example", Kind: "Y"}, readings: 2,
		},
		"a kind installed since, within missTTL: not served until read again": {
			madeUp: 1, install: true, want: later, readings: 1,
		},
		"a kind installed since, its CRD's event seen: read again at once": {
			madeUp: 1, install: true, forget: true, want: later, found: true, readings: 2, reached: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			behind := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "example.org", Version: "v1"}})
			behind.Add(served.WithVersion("v1"), meta.RESTScopeNamespace)
			c := &countingMapper{RESTMapper: behind}
			now := time.Unix(0, 0)
			kinds := map[schema.GroupKind]bool{served: true}
			readings := 0
			m := &restMapper{RESTMapper: c, answers: map[string]answer{}, now: func() time.Time { return now },
				served: func() (map[schema.GroupKind]bool, error) { readings++; return maps.Clone(kinds), nil }}
			for i := range tc.madeUp {
				gk := schema.GroupKind{Group: fmt.Sprintf("g%d.made.up", i), Kind: "K"}
				if _, err := m.RESTMapping(gk); !meta.IsNoMatchError(err) {
					t.Fatalf("made-up kind %d: %v, want a miss", i, err)
				}
			}
			now = now.Add(tc.after)
			if tc.install {
				kinds[later] = true
				behind.Add(later.WithVersion("v1"), meta.RESTScopeNamespace)
			}
			if tc.forget {
				m.forget()
			}
			r, err := m.RESTMapping(tc.want)
			if found := err == nil && r != nil; found != tc.found {
				t.Errorf("%s: found %t (%v), want %t", tc.want, found, err, tc.found)
			}
			if readings != tc.readings || c.lookups != tc.reached {
				t.Errorf("discovery read %d times, the mapper behind asked %d times; want %d and %d", readings, c.lookups, tc.readings, tc.reached)
			}
		})
	}
}
