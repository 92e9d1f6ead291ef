package xrd

import (
	"context"
	"slices"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/apply"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/webhook"
)

// OwnCRDLabels are the labels CAPXP's own CRDs carry, by CRD name: CAPI
// finds the templates' contract version through CAPIContractLabel, and
// clusterctl finds (and moves) the kinds through its labels.
func OwnCRDLabels() map[string]map[string]string {
	g := infrav1.GroupVersion.Group
	grant := map[string]string{infrav1.ProviderLabel: infrav1.ProviderName, infrav1.ClusterctlLabel: ""}
	return map[string]map[string]string{
		"crossplaneclustertemplates." + g:      infrav1.ContractLabels(),
		"crossplanemachinetemplates." + g:      infrav1.ContractLabels(),
		"crossplanemachinepooltemplates." + g:  infrav1.ContractLabels(),
		"crossplanecontrolplanetemplates." + g: infrav1.ContractLabels(),
		"clusterproviderconfiggrants." + g:     grant,
		// The bridge's own records, one in every namespace: not clusterctl's
		// to move, nor objects a user must delete before `clusterctl delete
		// --include-crd` (notClusterctl).
		"namespacecredentials." + g: {infrav1.ProviderLabel: infrav1.ProviderName},
	}
}

// notClusterctl are CAPXP's CRDs whose objects the bridge keeps itself:
// clusterctl labels everything it installs, and would refuse to delete the
// provider while they exist, and move them. The bridge removes clusterctl's
// label from these, and has the manager's namespace own them, so
// `clusterctl delete --include-namespace` removes them and their objects
// as it removes the admission objects.
var notClusterctl = map[string]bool{"namespacecredentials." + infrav1.GroupVersion.Group: true}

// OwnCRDs labels CAPXP's own CRDs when whoever installed them did not.
// clusterctl installs them as shipped, labels included; Crossplane's package
// manager installs a provider package's CRDs through
// ManagedResourceDefinitions, whose CRDs carry no labels, and CAPI cannot
// use an infrastructure template whose CRD has no contract label. The
// labels are applied server-side under their own field manager, which
// Crossplane's apply of the CRD leaves alone.
type OwnCRDs struct {
	client client.Client
	want   map[string]map[string]string
	// webhook names the manager's namespace, which owns the CRDs the
	// bridge releases from clusterctl.
	webhook *webhook.ClientConfig
}

// NewOwnCRDs returns an OwnCRDs restoring OwnCRDLabels; wh, when set,
// names the manager's namespace.
func NewOwnCRDs(c client.Client, wh *webhook.ClientConfig) *OwnCRDs {
	return &OwnCRDs{client: c, want: OwnCRDLabels(), webhook: wh}
}

// ownCRDsFieldOwner is the field manager of the labels OwnCRDs applies.
const ownCRDsFieldOwner = "capxp-own-crds"

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=patch,resourceNames=crossplaneclustertemplates.infrastructure.cluster.x-k8s.io;crossplanemachinetemplates.infrastructure.cluster.x-k8s.io;crossplanemachinepooltemplates.infrastructure.cluster.x-k8s.io;crossplanecontrolplanetemplates.infrastructure.cluster.x-k8s.io;clusterproviderconfiggrants.infrastructure.cluster.x-k8s.io;namespacecredentials.infrastructure.cluster.x-k8s.io

func (r *OwnCRDs) SetupWithManager(mgr ctrl.Manager, o controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("capxp-own-crds").
		WithOptions(o).
		For(&extv1.CustomResourceDefinition{}, builder.OnlyMetadata, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			_, ok := r.want[o.GetName()]
			return ok
		}))).
		Complete(r)
}

// Reconcile applies the labels one CRD lacks: it observes the CRD's
// metadata (and, for one clusterctl must not keep, the manager's namespace),
// decides what to change (decideOwnCRD) and acts.
func (r *OwnCRDs) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	want, ok := r.want[req.Name]
	if !ok {
		return reconcile.Result{}, nil
	}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(extv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := r.client.Get(ctx, client.ObjectKey{Name: req.Name}, crd); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(errors.Wrap(err, errGetCRD))
	}
	var owners []metav1.OwnerReference
	if notClusterctl[req.Name] {
		var err error
		if owners, err = webhook.Owners(ctx, r.client, r.webhook); err != nil {
			return reconcile.Result{}, err
		}
	}
	d := decideOwnCRD(crd, want, notClusterctl[req.Name], owners)
	if d.release != nil {
		if err := r.client.Patch(ctx, d.release, client.MergeFrom(crd), client.FieldOwner(ownCRDsFieldOwner)); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(errors.Wrapf(err, "cannot release CustomResourceDefinition %s from clusterctl", req.Name))
		}
	}
	if !d.label {
		return reconcile.Result{}, nil
	}
	labelled, err := apply.LabelCRD(ctx, r.client, nil, req.Name, want, ownCRDsFieldOwner)
	if err != nil || !labelled {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).Info("Labelled CAPXP's CRD for CAPI and clusterctl", "CustomResourceDefinition", req.Name)
	return reconcile.Result{}, nil
}

// ownCRDChange is what one of CAPXP's CRDs needs.
type ownCRDChange struct {
	// release is the CRD without clusterctl's label and owned by the
	// manager's namespace, when it is not so yet.
	release *metav1.PartialObjectMetadata
	// label: the CRD lacks some of the labels it should carry.
	label bool
}

// decideOwnCRD says what a CRD needs: the labels it lacks and, for one
// clusterctl must not keep (notClusterctl), its release from clusterctl to
// owners.
func decideOwnCRD(crd *metav1.PartialObjectMetadata, want map[string]string, release bool, owners []metav1.OwnerReference) ownCRDChange {
	out := ownCRDChange{label: !labels.SelectorFromSet(want).Matches(labels.Set(crd.GetLabels()))}
	if !release {
		return out
	}
	released := crd.DeepCopy()
	delete(released.Labels, infrav1.ClusterctlLabel)
	for _, o := range owners {
		if !slices.ContainsFunc(released.GetOwnerReferences(), func(x metav1.OwnerReference) bool { return x.UID == o.UID }) {
			released.SetOwnerReferences(append(released.GetOwnerReferences(), o))
		}
	}
	if !equality.Semantic.DeepEqual(crd.ObjectMeta, released.ObjectMeta) {
		out.release = released
	}
	return out
}
