// Package bench is CAPXP's scale benchmark (`make bench`): CAPI's real
// Cluster, Machine, MachineSet, MachineDeployment and MachineHealthCheck
// reconcilers on a real kube-apiserver, provisioning N machines behind one of two providers, side
// by side in one run:
//
//   - L0, an ideal provider: per XR one spec patch and one status patch, as
//     a hand-written CAPI provider would make them;
//   - L2, CAPXP's bridge, with a minimal composition engine standing in for
//     Crossplane (one status write per XR generation from its cache, Ready
//     and the outputs), so that L2/L0 measures the bridge and not an engine.
//     The machines' Composition declares their provider IDs, as the local
//     and bring-your-own backends' do;
//   - L2-reported, the same with provider IDs only reported once
//     provisioned, as a cloud's instance IDs are.
//
// Requests are counted at each component's HTTP transport, server-side
// applies and events included.
package bench

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// requests counts one component's API requests by verb class and resource.
type requests struct {
	mu     sync.Mutex
	counts map[string]int // "write events", "read machines", ...
	frozen bool
}

// freeze stops counting: what follows the measured phase (tearing the
// workload down) is not counted.
func (r *requests) freeze() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frozen = true
}

func newRequests() *requests { return &requests{counts: map[string]int{}} }

// wrap returns cfg with a transport that counts every request.
func (r *requests) wrap(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			r.add(req)
			return rt.RoundTrip(req)
		})
	})
	return c
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (r *requests) add(req *http.Request) {
	class := "write"
	switch req.Method {
	case http.MethodGet:
		class = "read"
		if req.URL.Query().Get("watch") == "true" {
			class = "watch"
		}
	case http.MethodHead, http.MethodOptions:
		class = "read"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.frozen {
		r.counts[class+" "+resource(req.URL.Path)]++
	}
}

// resource is the resource (and subresource) a request path names:
// /apis/g/v/namespaces/ns/machines/m/status -> machines/status.
func resource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) > 0 && parts[0] == "api":
		parts = parts[min(2, len(parts)):]
	case len(parts) > 0 && parts[0] == "apis":
		parts = parts[min(3, len(parts)):]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "discovery"
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}

// total sums the counts of a class ("write", "read", "watch"), optionally
// for resources with a prefix.
func (r *requests) total(class, prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k, v := range r.counts {
		c, res, _ := strings.Cut(k, " ")
		if c == class && strings.HasPrefix(res, prefix) {
			n += v
		}
	}
	return n
}

// lines renders the counts of a class, largest first.
func (r *requests) lines(class string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	type kv struct {
		k string
		v int
	}
	var all []kv
	for k, v := range r.counts {
		if strings.HasPrefix(k, class+" ") {
			all = append(all, kv{strings.TrimPrefix(k, class+" "), v})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v || all[i].v == all[j].v && all[i].k < all[j].k })
	out := make([]string, 0, len(all))
	for _, e := range all {
		out = append(out, e.k+"="+strconv.Itoa(e.v))
	}
	return out
}
