package tenancy

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	xpmeta "github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/credentials"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/policies"
)

// write creates the record or updates it when it differs. A pending record
// carries when it became pending (a change of what it admits restarts
// that). An update carries the resourceVersion read, so a record decided
// on a stale read never lands; a conflict is returned. It clears the lock
// mark: what the record locks has been judged again.
func (r *Records) write(ctx context.Context, ns string, rec *infrav1.NamespaceCredentials, spec infrav1.NamespaceCredentialsSpec, pending bool) (*infrav1.NamespaceCredentials, error) {
	return r.writeMarked(ctx, ns, rec, spec, pending, "")
}

// writeMarked is write that sets the lock mark to lockedAt, unless empty.
func (r *Records) writeMarked(ctx context.Context, ns string, rec *infrav1.NamespaceCredentials, spec infrav1.NamespaceCredentialsSpec, pending bool, lockedAt string) (*infrav1.NamespaceCredentials, error) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	if rec == nil {
		rec = &infrav1.NamespaceCredentials{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: infrav1.NamespaceCredentialsName, Labels: policies.Labels()},
			Spec:       spec,
		}
		if needsFinalizer(&spec) {
			rec.Finalizers = []string{infrav1.NamespaceCredentialsFinalizer}
		}
		marks := map[string]string{}
		if pending {
			marks[revocationPendingAnnotation] = now
		}
		if lockedAt != "" {
			marks[lockedAnnotation] = lockedAt
		}
		if len(marks) > 0 {
			rec.SetAnnotations(marks)
		}
		return rec, errors.Wrap(r.client.Create(ctx, rec), errWriteRecord)
	}
	stamp := rec.GetAnnotations()[revocationPendingAnnotation]
	switch {
	case !pending:
		stamp = ""
	case stamp == "" || !credentials.SameUse(&rec.Spec, &spec):
		stamp = now
	}
	// A record that lists a config gains the finalizer, and keeps it until
	// released; one being deleted cannot gain it.
	finalize := needsFinalizer(&spec) && rec.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(rec, infrav1.NamespaceCredentialsFinalizer)
	if equality.Semantic.DeepEqual(rec.Spec, spec) && rec.GetAnnotations()[revocationPendingAnnotation] == stamp && rec.GetAnnotations()[lockedAnnotation] == lockedAt && !finalize {
		return rec, nil
	}
	rec = rec.DeepCopy()
	if finalize {
		controllerutil.AddFinalizer(rec, infrav1.NamespaceCredentialsFinalizer)
	}
	rec.Spec = spec
	xpmeta.RemoveAnnotations(rec, revocationPendingAnnotation, lockedAnnotation)
	if stamp != "" {
		xpmeta.AddAnnotations(rec, map[string]string{revocationPendingAnnotation: stamp})
	}
	if lockedAt != "" {
		xpmeta.AddAnnotations(rec, map[string]string{lockedAnnotation: lockedAt})
	}
	return rec, errors.Wrap(r.client.Update(ctx, rec), errWriteRecord)
}

// needsFinalizer reports whether a record written with spec must outlive
// its namespace's managed resources: it lists a config they may name. A
// record that never listed one admitted none (the manager's own
// namespace's, a new namespace's), and its namespace goes at once, whether
// the manager runs or not.
func needsFinalizer(spec *infrav1.NamespaceCredentialsSpec) bool {
	return len(spec.Configs) > 0
}

// releaseRecheck is how often a deleted record looks again for the managed
// resources of its namespace that still need it.
const releaseRecheck = 5 * time.Second

// release removes the finalizer of a deleted record once its namespace
// holds no managed resource of an enforced provider the manager may read:
// until then the API server judges their updates (a provider's finalizer
// removal too) with it, and without it would refuse them all. released:
// the record goes.
func (r *Records) release(ctx context.Context, rec *infrav1.NamespaceCredentials) (reconcile.Result, bool, error) {
	if !controllerutil.ContainsFinalizer(rec, infrav1.NamespaceCredentialsFinalizer) {
		return reconcile.Result{}, true, nil
	}
	kinds, err := r.managedKinds(ctx)
	if err != nil {
		return reconcile.Result{}, false, err
	}
	for i := range kinds {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(kinds[i].gvk.GroupVersion().WithKind(kinds[i].gvk.Kind + "List"))
		err := r.managed.List(ctx, l, client.InNamespace(rec.Namespace), client.Limit(1))
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return reconcile.Result{}, false, errors.Wrapf(err, "cannot list %s", kinds[i].gvk.Kind)
		}
		if len(l.Items) > 0 {
			return reconcile.Result{RequeueAfter: releaseRecheck}, false, nil
		}
	}
	rec = rec.DeepCopy()
	controllerutil.RemoveFinalizer(rec, infrav1.NamespaceCredentialsFinalizer)
	if err := r.client.Update(ctx, rec); err != nil {
		res, err := writeResult(client.IgnoreNotFound(err))
		return res, false, err
	}
	return reconcile.Result{}, true, nil
}
