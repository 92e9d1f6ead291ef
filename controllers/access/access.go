// Package access asks the API server what the manager may do, with
// SelfSubjectAccessReviews, and remembers the answers: the bridge reports a
// permission it lacks rather than read through a cache that would never
// sync.
package access

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"golang.org/x/sync/singleflight"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/capxp/cluster-api-provider-crossplane/bridge/lifecycle"
)

// MayNot asks the API server, with a SelfSubjectAccessReview per verb, which
// verbs (each "verb[/subresource]") the bridge may not use on a resource; each
// answer is "<verb> <resource>[/<subresource>].<group>".
func MayNot(ctx context.Context, c client.Client, gr schema.GroupResource, verbs ...string) ([]string, error) {
	var missing []string
	for _, v := range verbs {
		verb, sub, _ := strings.Cut(v, "/")
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: gr.Group, Resource: gr.Resource, Subresource: sub},
		}}
		if err := c.Create(ctx, review); err != nil {
			return nil, errors.Wrapf(err, "cannot ask whether the bridge may %s %s", verb, gr)
		}
		if review.Status.Allowed {
			continue
		}
		resource := gr.Resource
		if sub != "" {
			resource += "/" + sub
		}
		missing = append(missing, fmt.Sprintf("%s %s", verb, schema.GroupResource{Group: gr.Group, Resource: resource}))
	}
	return missing, nil
}

// Reads asks the API server, with SelfSubjectAccessReviews, which of
// get, list and watch the bridge may not use on a resource. It remembers a
// resource it may read for good, and one it may not for RecheckAfter,
// so that a reference to it costs no review on every reconcile; reconciles
// that ask about the same resource at once share one set of reviews.
type Reads struct {
	client client.Client
	flight singleflight.Group

	mu     sync.Mutex
	ok     map[schema.GroupResource]bool
	denied map[schema.GroupResource]deniedAt
	now    func() time.Time
}

// RecheckAfter is how long a resource the manager may not read is taken as
// such before it is asked about again.
const RecheckAfter = lifecycle.RecheckAccessAfter

type deniedAt struct {
	missing []string
	at      time.Time
}

// NewReads returns a Reads asking with c.
func NewReads(c client.Client) *Reads {
	return &Reads{client: c, ok: map[schema.GroupResource]bool{}, denied: map[schema.GroupResource]deniedAt{}, now: time.Now}
}

// Readable remembers resources as readable without asking: for a caller
// that knows, such as a test whose fake API server answers no review.
func (a *Reads) Readable(grs ...schema.GroupResource) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, gr := range grs {
		a.ok[gr] = true
	}
}

// Missing returns which of get, list and watch the manager may not use on
// the resource ("<verb> <resource>.<group>"); none when it may read it.
func (a *Reads) Missing(ctx context.Context, gr schema.GroupResource) ([]string, error) {
	a.mu.Lock()
	ok, d, wasDenied := a.ok[gr], a.denied[gr], false
	if _, found := a.denied[gr]; found {
		wasDenied = a.now().Sub(d.at) < RecheckAfter
	}
	a.mu.Unlock()
	switch {
	case ok:
		return nil, nil
	case wasDenied:
		return d.missing, nil
	}
	v, err, _ := a.flight.Do(gr.String(), func() (any, error) {
		missing, err := MayNot(ctx, a.client, gr, "get", "list", "watch")
		if err != nil {
			return nil, err
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if len(missing) == 0 {
			a.ok[gr] = true
			delete(a.denied, gr)
		} else {
			a.denied[gr] = deniedAt{missing: missing, at: a.now()}
		}
		return missing, nil
	})
	if err != nil {
		return nil, err
	}
	missing, _ := v.([]string)
	return missing, nil
}
