package tenancy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/cluster-api/util"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/budget"
)

// judgement says what a judgement could not settle: a named Secret is
// missing; the namespace's Secret reads were spent, more may be read after
// unread; a Secret could not be read.
type judgement struct {
	missing bool
	unread  time.Duration
	// failed: a Secret could not be read, and its config was refused.
	failed bool
}

// requeue is how soon what the judgement could not settle is judged again.
func (j judgement) requeue() reconcile.Result {
	var res reconcile.Result
	if j.missing {
		// The bridge does not watch Secrets: look for a missing one again.
		res.RequeueAfter = credentials.RecheckSecretAfter
	}
	if j.failed {
		res = util.LowestNonZeroResult(res, reconcile.Result{RequeueAfter: unreadableRecheck})
	}
	if j.unread > 0 {
		// The namespace's Secret reads were spent: judge the rest in turn.
		res = util.LowestNonZeroResult(res, reconcile.Result{RequeueAfter: j.unread})
	}
	return res
}

// judge computes the record a namespace's configs, as read with configs,
// earn it; prev is its record as read, whose verdicts stand for what is not
// read again. relocked: the record has just locked what it judged, and
// the configs it locked are read again first, on the manager-wide budget.
func (r *Records) judge(ctx context.Context, ns *corev1.Namespace, grants []infrav1.ClusterProviderConfigGrant, configs client.Reader, prev *infrav1.NamespaceCredentialsSpec, relocked bool) (infrav1.NamespaceCredentialsSpec, judgement, error) {
	own, j, err := r.ownConfigs(ctx, ns.Name, configs, prev, relocked)
	if err != nil {
		return infrav1.NamespaceCredentialsSpec{}, j, err
	}
	spec, err := credentials.Usable(ns, grants, r.providers, own, r.all, prev)
	if err != nil {
		return spec, j, errors.Wrap(err, errComputeRecord)
	}
	spec.Networks, err = r.ownNetworks(ctx, ns.Name)
	return spec, j, err
}

// ownNetworks reads the network IDs the namespace's own managed resources
// report, from the cache (the kinds are watched for a change of what they
// report); nil when there are none.
func (r *Records) ownNetworks(ctx context.Context, ns string) (map[string]string, error) {
	owned := map[string]string{}
	for _, k := range r.networks {
		m, err := r.client.RESTMapper().RESTMapping(k.GroupKind)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, errors.Wrapf(err, "cannot map %s", k.GroupKind)
		}
		if m.Scope.Name() != meta.RESTScopeNameNamespace {
			continue
		}
		if ok, err := r.mayRead(ctx, m, "Cannot list the networks the namespace owns: grant the manager list and watch on this kind"); !ok || err != nil {
			// Not readable: the namespace owns no network of the kind.
			if err != nil {
				return nil, err
			}
			continue
		}
		if err := r.watchNetworks(m.GroupVersionKind, k); err != nil {
			return nil, err
		}
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(m.GroupVersionKind.GroupVersion().WithKind(m.GroupVersionKind.Kind + "List"))
		if err := r.client.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil, errors.Wrapf(err, "cannot list %s", k.GroupKind)
		}
		credentials.Networks(k, l.Items, owned)
	}
	if len(owned) > credentials.MaxNetworks {
		// Bounded, whatever the namespace composes: the IDs past the limit
		// are not its to name.
		ids := slices.Sorted(maps.Keys(owned))
		for _, id := range ids[credentials.MaxNetworks:] {
			delete(owned, id)
		}
	}
	if len(owned) == 0 {
		return nil, nil
	}
	return owned, nil
}

// mayRead reports whether the manager may list and watch the kind; the
// first time it may not, it logs why.
func (r *Records) mayRead(ctx context.Context, m *meta.RESTMapping, why string) (bool, error) {
	if r.access == nil {
		return true, nil
	}
	missing, err := r.access.Missing(ctx, m.Resource.GroupResource())
	if err != nil || len(missing) == 0 {
		return err == nil, err
	}
	r.mu.Lock()
	logged := r.unreadable[m.GroupVersionKind]
	r.unreadable[m.GroupVersionKind] = true
	r.mu.Unlock()
	if !logged {
		ctrl.LoggerFrom(ctx).Info(why, "kind", m.GroupVersionKind.String(), "missing", missing)
	}
	return false, nil
}

// ownConfigs reads the namespace's ProviderConfigs of every enforced
// provider the API serves, and the Secrets they name: not those of a config
// whose verdict in prev stands (credentials.Carried), and, once the
// namespace's reads are spent, not those of the configs read least recently.
func (r *Records) ownConfigs(ctx context.Context, ns string, configs client.Reader, prev *infrav1.NamespaceCredentialsSpec, relocked bool) ([]credentials.OwnConfig, judgement, error) {
	var own []credentials.OwnConfig
	var created []time.Time
	var j judgement
	for _, p := range r.providers {
		m, err := r.client.RESTMapper().RESTMapping(schema.GroupKind{Group: p.ConfigGroup, Kind: string(infrav1.ProviderConfigKindNamespaced)})
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, j, errors.Wrapf(err, "cannot map %s ProviderConfig", p.ConfigGroup)
		}
		if m.Scope.Name() != meta.RESTScopeNameNamespace {
			// A legacy cluster-scoped ProviderConfig: namespaced managed
			// resources cannot name it.
			continue
		}
		if ok, err := r.mayRead(ctx, m, "Cannot judge the namespace's own ProviderConfigs of this kind: grant the manager list and watch on it"); !ok || err != nil {
			// Not readable: none of them is listed usable.
			if err != nil {
				return nil, j, err
			}
			continue
		}
		if err := r.watch(m.GroupVersionKind, predicate.GenerationChangedPredicate{}); err != nil {
			return nil, j, err
		}
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(m.GroupVersionKind.GroupVersion().WithKind(m.GroupVersionKind.Kind + "List"))
		if err := configs.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil, j, errors.Wrapf(err, "%s %s", errListConfigs, p.ConfigGroup)
		}
		for i := range l.Items {
			spec, _ := l.Items[i].Object["spec"].(map[string]any)
			c := credentials.OwnConfig{Provider: p, Name: l.Items[i].GetName(), Spec: fieldpath.Pave(map[string]any{"spec": spec}), Secrets: map[string]map[string][]byte{}}
			c.Unread = credentials.Carried(prev, &c)
			own = append(own, c)
			created = append(created, l.Items[i].GetCreationTimestamp().Time)
		}
	}
	// The configs never read first, the newest first, then the least
	// recently read: a namespace whose reads run out has a new config
	// judged at once, and every other in turn.
	order := r.readOrder(ns, own, created)
	if relocked {
		// What the record locked to judge again comes first, and is read
		// on the manager-wide budget: it was read on the namespace's
		// once, and cannot change since.
		again := func(i int) bool { return !own[i].Unread && credentials.Locked(prev, &own[i]) }
		sort.SliceStable(order, func(a, b int) bool { return again(order[a]) && !again(order[b]) })
	}
	for _, i := range order {
		c := &own[i]
		if c.Unread {
			continue
		}
		secrets := r.secrets
		if relocked && credentials.Locked(prev, c) {
			secrets = r.relock
		} else if j.unread > 0 {
			c.Unread = true
			continue
		}
		for _, name := range credentials.SecretsNamed(c.Spec) {
			// Every failure here is a verdict on this config alone: the
			// others are judged, and the record written, whatever it is.
			if why := credentials.InvalidSecretRef(ns, name); why != "" {
				c.Unreadable = map[string]string{name: why}
				break
			}
			s := &corev1.Secret{}
			err := secrets.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s)
			var spent *budget.Exceeded
			switch {
			case errors.As(err, &spent):
				j.unread = spent.RetryAfter
				c.Unread = true
			case apierrors.IsNotFound(err):
				j.missing = true
			case err != nil:
				// Refused until a read succeeds; read again soon. The
				// message keeps the error's reason only: it must not
				// change from one try to the next.
				c.Unreadable = map[string]string{name: fmt.Sprintf("Secret %s/%s cannot be read (%s); it is read again", ns, name, apierrors.ReasonForError(err))}
				j.failed = true
				ctrl.LoggerFrom(ctx).Info("Cannot read a credentials Secret: its ProviderConfig is refused until it can be", "secret", klog.KRef(ns, name), "error", err.Error())
			default:
				c.Secrets[name] = s.Data
			}
			if c.Unread || c.Unreadable != nil {
				break
			}
		}
		if !c.Unread {
			r.read(ns, c)
		}
	}
	return own, j, nil
}

// readOrder returns the indexes of own: the configs never read, those the
// bridge saw last first, then the others, least recently read first; it
// forgets configs that no longer exist.
func (r *Records) readOrder(ns string, own []credentials.OwnConfig, created []time.Time) []int {
	r.readMu.Lock()
	defer r.readMu.Unlock()
	now := time.Now()
	last := r.lastRead[ns]
	kept := make(map[string]readTimes, len(own))
	order := make([]int, len(own))
	keys := make([]string, len(own))
	for i := range own {
		order[i] = i
		keys[i] = own[i].Provider.ConfigGroup + "/" + own[i].Name
		t, ok := last[keys[i]]
		if !ok {
			t.seen = now
		}
		kept[keys[i]] = t
	}
	if len(kept) == 0 {
		delete(r.lastRead, ns)
	} else {
		r.lastRead[ns] = kept
	}
	sort.SliceStable(order, func(a, b int) bool {
		ta, tb := kept[keys[order[a]]], kept[keys[order[b]]]
		switch {
		case ta.read.IsZero() && tb.read.IsZero() && !ta.seen.Equal(tb.seen):
			return ta.seen.After(tb.seen)
		case ta.read.IsZero() && tb.read.IsZero():
			return created[order[a]].After(created[order[b]])
		}
		return ta.read.Before(tb.read)
	})
	return order
}

// readTimes are when the bridge first saw a config, and last read its
// Secrets.
type readTimes struct{ seen, read time.Time }

// read notes that the namespace's config was read.
func (r *Records) read(ns string, c *credentials.OwnConfig) {
	r.readMu.Lock()
	defer r.readMu.Unlock()
	k := c.Provider.ConfigGroup + "/" + c.Name
	t := r.lastRead[ns][k]
	t.read = time.Now()
	if r.lastRead[ns] == nil {
		r.lastRead[ns] = map[string]readTimes{}
	}
	r.lastRead[ns][k] = t
}
