package controllers

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
)

// mayNot asks the API server, with a SelfSubjectAccessReview per verb, which
// verbs (each "verb[/subresource]") the bridge may not use on a resource; each
// answer is "<verb> <resource>[/<subresource>].<group>".
func mayNot(ctx context.Context, c client.Client, gr schema.GroupResource, verbs ...string) ([]string, error) {
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

// readAccess asks the API server, with SelfSubjectAccessReviews, which of
// get, list and watch the bridge may not use on a resource. It remembers a
// resource it may read for good, and one it may not for recheckAccessAfter,
// so that a reference to it costs no review on every reconcile; reconciles
// that ask about the same resource at once share one set of reviews.
type readAccess struct {
	client client.Client
	flight singleflight.Group

	mu     sync.Mutex
	ok     map[schema.GroupResource]bool
	denied map[schema.GroupResource]deniedAt
	now    func() time.Time
}

type deniedAt struct {
	missing []string
	at      time.Time
}

func newReadAccess(c client.Client) *readAccess {
	return &readAccess{client: c, ok: map[schema.GroupResource]bool{}, denied: map[schema.GroupResource]deniedAt{}, now: time.Now}
}

func (a *readAccess) missing(ctx context.Context, gr schema.GroupResource) ([]string, error) {
	a.mu.Lock()
	ok, d, wasDenied := a.ok[gr], a.denied[gr], false
	if _, found := a.denied[gr]; found {
		wasDenied = a.now().Sub(d.at) < recheckAccessAfter
	}
	a.mu.Unlock()
	switch {
	case ok:
		return nil, nil
	case wasDenied:
		return d.missing, nil
	}
	v, err, _ := a.flight.Do(gr.String(), func() (any, error) {
		missing, err := mayNot(ctx, a.client, gr, "get", "list", "watch")
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
