package restmapper

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

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
