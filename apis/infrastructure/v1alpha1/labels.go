package v1alpha1

// Labels and annotations CAPXP defines or relies on.
const (
	// ContractLabel marks a CompositeResourceDefinition whose composite
	// resources implement a CAPI contract. Its value is one of
	// ContractInfraCluster, ContractInfraMachine, ContractInfraMachinePool or
	// ContractControlPlane. The
	// bridge adapts every XRD carrying it, not only the ones CAPXP ships.
	ContractLabel = "capxp.dev/contract"

	// ContractInfraCluster is the ContractLabel value of an InfraCluster XRD.
	ContractInfraCluster = "InfraCluster"

	// ContractInfraMachine is the ContractLabel value of an InfraMachine XRD.
	ContractInfraMachine = "InfraMachine"

	// ContractInfraMachinePool is the ContractLabel value of an
	// InfraMachinePool XRD: a group of machines the backend scales.
	ContractInfraMachinePool = "InfraMachinePool"

	// ContractControlPlane is the ContractLabel value of a ControlPlane XRD:
	// a managed control plane.
	ContractControlPlane = "ControlPlane"

	// CAPIContractLabel is the label CAPI reads on a CRD to learn which of the
	// CRD's API versions implements the v1beta2 contract. Crossplane copies
	// it from the XRD onto the CRD it generates.
	CAPIContractLabel = "cluster.x-k8s.io/v1beta2"

	// ProviderLabel names the clusterctl provider that owns a CRD.
	ProviderLabel = "cluster.x-k8s.io/provider"

	// ProviderName is CAPXP's clusterctl provider name.
	ProviderName = "infrastructure-crossplane"

	// ClusterctlLabel makes clusterctl find (and move) objects of a CRD.
	ClusterctlLabel = "clusterctl.cluster.x-k8s.io"

	// BlockMoveAnnotation is clusterctl's: `clusterctl move` waits, after it
	// has paused the clusters it moves, until none of the objects it moves
	// carries it. The bridge keeps it on every XR that has composed
	// resources, and removes it once the XR is paused and its composed
	// resources are guarded (MoveGuardFinalizer). See docs/move.md.
	BlockMoveAnnotation = "clusterctl.cluster.x-k8s.io/block-move"

	// MoveGuardFinalizer is the bridge's finalizer on the composed resources
	// of a paused XR. Crossplane's managed resource reconciler does not
	// delete the external resource of a managed resource that carries
	// another finalizer than its own, so the guard keeps `clusterctl move`
	// (which deletes each moved object, then removes its finalizers) from
	// deleting infrastructure that the target now manages.
	MoveGuardFinalizer = "capxp.dev/move-guard"

	// PausedForMoveAnnotation marks a composed resource the bridge paused
	// (crossplane.io/paused) with its move guard. Managed resource
	// reconcilers of crossplane-runtime releases before the finalizer check
	// above (provider-upjet-aws v2.5.0's among them) delete the external
	// resource whatever other finalizers there are, but none acts on a
	// paused resource. The bridge removes the pause with the guard, and
	// only a pause it set.
	PausedForMoveAnnotation = "capxp.dev/paused-for-move"

	// InjectedFromAnnotation, on a machine XR, says where each field the
	// bridge's machine gate gave the composition came from, one line per
	// field ("spec.network.subnetID: CrossplaneCluster demo's
	// status.outputs.network", "spec.network.region: the machine's own
	// spec"). Written with the injection, once.
	InjectedFromAnnotation = "capxp.dev/injected-from"

	// CrossplanePausedAnnotation pauses Crossplane's reconciliation of an
	// object. The bridge sets it on XRs to carry CAPI's pause and to gate
	// machines until they may be composed, and holds every new XR with it
	// until its credentials are checked; only the bridge may remove it.
	CrossplanePausedAnnotation = "crossplane.io/paused"

	// CredentialsHoldAnnotation marks a composed resource the bridge paused
	// (CrossplanePausedAnnotation) because its XR's credentials may no
	// longer be used; the bridge resumes exactly those once they may.
	CredentialsHoldAnnotation = "capxp.dev/held-for-credentials"

	// CompositionSelectorAnnotation records, on an adapted InfraCluster XR,
	// the compositionSelector its selected Composition was last checked
	// against: when the selector changes and that Composition no longer
	// matches, the bridge releases it for Crossplane to select again.
	CompositionSelectorAnnotation = "capxp.dev/composition-selector"

	// CredentialsRevokedLabel marks a managed resource the bridge paused
	// because the config its spec.providerConfigRef names is no longer one
	// its namespace may use (a grant revoked, a config gone or turned
	// shared). Its value is CredentialsRevokedPaused when the bridge set the
	// pause, CredentialsRevokedKept when someone else had; once the config
	// may be used again (granted again, or the resource's reference changed
	// to one its namespace may use) the bridge removes the mark, and the
	// pause only if it set it and no hold of its own remains. A label, so
	// that the bridge can watch the few resources it marked, and nothing
	// else.
	CredentialsRevokedLabel  = "capxp.dev/credentials-revoked"
	CredentialsRevokedPaused = "paused"
	CredentialsRevokedKept   = "kept"

	// ProviderIDAnnotation, on a Composition of an InfraMachine kind,
	// declares the provider ID the Composition will report before it
	// composes anything: a template of the XR's own fields in braces
	// ("capxp-local:///{metadata.namespace}/{metadata.name}"). The bridge
	// then writes spec.providerID with the machine gate's injection, and
	// writes no new generation of the XR once it is Ready. See
	// docs/composition-authors.md.
	ProviderIDAnnotation = "capxp.dev/provider-id"

	// InPlaceFieldsAnnotation, on a Composition of an InfraMachine kind,
	// lists the fields of the XR's spec (comma-separated paths, such as
	// "spec.parameters.size") whose change the Composition's composed
	// resources take on a running machine. Crossplane copies it onto each
	// CompositionRevision, so each machine is judged by the revision it
	// is pinned to. CAPXP's in-place update extension updates a machine
	// in place only when every field that changes is listed; any other
	// change replaces it. See docs/composition-authors.md.
	InPlaceFieldsAnnotation = "capxp.dev/in-place-fields"

	// InPlaceBootstrapFieldsAnnotation, on a Composition of an
	// InfraMachine kind, lists the fields of a Machine's bootstrap config
	// spec (comma-separated paths, such as "spec.files") whose change the
	// Composition's hosts apply on a running machine. Like
	// InPlaceFieldsAnnotation it is read from the CompositionRevision each
	// machine is pinned to; a bootstrap change it does not list replaces
	// the machine. See docs/composition-authors.md.
	InPlaceBootstrapFieldsAnnotation = "capxp.dev/in-place-bootstrap-fields"
)

// ContractLabels returns the labels CAPXP's template CRDs and XRDs carry so
// that CAPI resolves the contract version and clusterctl finds and moves
// them (the generated XRDs keep the contract label alone; the grant and
// NamespaceCredentials CRDs carry their own sets, controllers/xrd's
// OwnCRDLabels).
func ContractLabels() map[string]string {
	return map[string]string{
		CAPIContractLabel: GroupVersion.Version,
		ProviderLabel:     ProviderName,
		ClusterctlLabel:   "",
	}
}
