// Package contracts is where CAPI's provider contracts differ for an
// adapted XR: InfraCluster, InfraMachine, InfraMachinePool and ControlPlane,
// each one Contract. Everything else about an adapted XR (its finalizer,
// pause, credentials, deletion and the one deferred write) is the XR
// reconciler's, which reads the XR and calls its Contract with a Scope; a
// Contract reads CAPI's objects and the cluster's infrastructure, and writes
// only what its contract asks of a provider besides the XR (a managed
// control plane's kubeconfig Secret).
package contracts

import (
	"context"

	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	xpextv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/unstructured/composite"

	infrav1 "github.com/capxp/cluster-api-provider-crossplane/apis/infrastructure/v1alpha1"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/outputs"
	"github.com/capxp/cluster-api-provider-crossplane/bridge/verdict"
	"github.com/capxp/cluster-api-provider-crossplane/controllers/composed"
)

// A Contract is what one CAPI contract asks of an adapted XR.
type Contract interface {
	// ConditionType is the condition of the owner the verdict goes to.
	ConditionType() string
	// Owner reads the CAPI object that owns the XR (a Cluster, Machine or
	// MachinePool) and its Cluster into s; it leaves them nil while CAPI
	// has not set the owner reference or the owner is gone.
	Owner(ctx context.Context, s *Scope) error
	// PauseUnowned says whether an XR that has no CAPI owner yet must be
	// paused; nil leaves the annotation as it is.
	PauseUnowned(xr *composite.Unstructured) *bool
	// Prepare readies a not paused, not deleting XR for composition: it
	// returns a verdict to hold the XR paused with, or nil to go on. It may
	// inject spec fields into s.XR. It is called only once Owner found the
	// XR's owner and its Cluster.
	Prepare(ctx context.Context, s *Scope) (*verdict.Verdict, error)
	// Outputs maps the composition's outputs (package bridge/outputs
	// decides what maps where): their field errors, and the spec fields to
	// set once the XR satisfies its contract, with an event message for the
	// first time it does (none when empty).
	Outputs(s *Scope) (set outputs.Fields, provisioned string, errs field.ErrorList)
	// Milestone is the contract's status once the XR satisfies it: the
	// milestone that never goes back, and what goes with it.
	Milestone(xr *unstructured.Unstructured) map[string]any
	// ObservePublished reads into s what Publication decides on, for an XR
	// whose gate is open.
	ObservePublished(ctx context.Context, s *Scope) error
	// Publication decides what the contract asks of the provider besides
	// the XR, once the XR satisfies its contract, from what
	// ObservePublished read: what to write, or a verdict while it cannot;
	// and when to look again.
	Publication(s *Scope) Publication
	// Publish writes what a Publication decided.
	Publish(ctx context.Context, s *Scope, p Publication) error
	// Reselects says whether a changed compositionSelector re-selects the
	// Composition: CAPI re-templates the XR in place rather than replacing
	// it.
	Reselects() bool
	// WaitBeforeDelete names what must be gone before the XR's own
	// composed resources go; nil when nothing.
	WaitBeforeDelete(ctx context.Context, xr *composite.Unstructured) (*verdict.Verdict, error)
	// Watches are the CAPI objects whose changes concern XRs of the kind.
	Watches(env WatchEnv, gvk schema.GroupVersionKind, xr *unstructured.Unstructured) []Watch
}

// Scope is what one reconcile of an XR hands its Contract: the working copy
// of the XR, which Prepare and Outputs may change and the reconciler
// writes once, what Owner read, and the events to record on the XR once
// the write succeeds.
type Scope struct {
	// XR is the working copy.
	XR *composite.Unstructured
	// Owner is the CAPI object that owns the XR, nil when none; Machine or
	// Pool is the same object, typed, when the owner is one.
	Owner   client.Object
	Machine *clusterv1.Machine
	Pool    *clusterv1.MachinePool
	// Cluster is the owner's Cluster.
	Cluster *clusterv1.Cluster
	// EndpointFromControlPlane: the Cluster's control plane is a managed
	// one that provides the endpoint, so its infrastructure XR need not.
	EndpointFromControlPlane bool
	// Kubeconfig is what a control plane's ObservePublished read; nil
	// for the other contracts, and while the XR's outputs are invalid.
	Kubeconfig *Kubeconfig
	// Events are recorded on the XR once the writes succeed.
	Events []Event
}

// Event is an event to record on the XR.
type Event struct{ Type, Reason, Message string }

// Publication is what a contract publishes besides the XR once it satisfies
// the contract: a Secret to create or to update (neither: nothing to write)
// and the event that says so; or a verdict that holds the XR until it can.
// Again is when to look again.
type Publication struct {
	Held           *verdict.Verdict
	Again          reconcile.Result
	Create, Update *corev1.Secret
	Event          Event
}

// Event adds an event to record on the XR.
func (s *Scope) Event(eventType, reason, message string) {
	s.Events = append(s.Events, Event{eventType, reason, message})
}

// WatchEnv is what a Contract's watches need of the manager: the context
// they live in, its client, scheme and logger.
type WatchEnv struct {
	Ctx    context.Context //nolint:containedctx // the watches' map functions outlive any one call.
	Client client.Client
	Scheme *runtime.Scheme
	Log    logr.Logger
}

// Watch is a kind of object whose changes concern XRs, and how to map one
// to them.
type Watch struct {
	Object     client.Object
	Map        handler.MapFunc
	Predicates []predicate.Predicate
}

// Options are what the Contracts need of the manager.
type Options struct {
	// Client reads through the manager's cache.
	Client client.Client
	// Missing names the verbs the bridge lacks on a kind: the cluster's
	// infrastructure is read through the cache, whose informer for a kind
	// the bridge may not list never syncs.
	Missing composed.MissingAccess
	// KubeconfigWritten counts a write of a cluster's kubeconfig Secret,
	// by the XR's kind.
	KubeconfigWritten func(kind string)
}

// infrastructure is what CAPI's infrastructure contracts (InfraCluster,
// InfraMachine, InfraMachinePool) share: the verdict goes to the owner's
// CrossplaneInfrastructureReady condition, the milestone is provisioned
// (and v1beta1's ready while CAPI reads it), and nothing is published
// besides the XR.
type infrastructure struct{}

func (infrastructure) ConditionType() string { return infrav1.CrossplaneInfrastructureReadyCondition }

func (infrastructure) Milestone(*unstructured.Unstructured) map[string]any {
	return map[string]any{"status.initialization.provisioned": true, "status.ready": true}
}

func (infrastructure) ObservePublished(context.Context, *Scope) error { return nil }

func (infrastructure) Publication(*Scope) Publication { return Publication{} }

func (infrastructure) Publish(context.Context, *Scope, Publication) error { return nil }

// New returns the Contract named by an XRD's contract label.
func New(name string, o Options) (Contract, error) {
	if o.KubeconfigWritten == nil {
		o.KubeconfigWritten = func(string) {}
	}
	machine := infraMachine{client: o.Client, missing: o.Missing}
	switch name {
	case infrav1.ContractInfraCluster:
		return infraCluster{client: o.Client}, nil
	case infrav1.ContractInfraMachine:
		return machine, nil
	case infrav1.ContractInfraMachinePool:
		return infraMachinePool{machine}, nil
	case infrav1.ContractControlPlane:
		return controlPlane{infraCluster: infraCluster{client: o.Client}, infra: machine, written: o.KubeconfigWritten}, nil
	}
	return nil, errors.Errorf("unknown contract %s", name)
}

// AddToScheme adds the kinds the Contracts read: core kinds and CRDs,
// CAPI's, Crossplane's definitions and Compositions, and CAPXP's own.
var AddToScheme = schemeBuilder.AddToScheme

var schemeBuilder = runtime.NewSchemeBuilder(clientgoscheme.AddToScheme, extv1.AddToScheme, clusterv1.AddToScheme,
	xpextv1.AddToScheme, xpextv2.AddToScheme, infrav1.AddToScheme)

// fieldManager is the bridge's field manager.
const fieldManager = composed.FieldManager
