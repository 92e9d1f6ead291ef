package v1alpha1

// Condition types the bridge owns. Crossplane owns Ready and Synced on the
// XR and the bridge never writes them; CAPI owns its own objects' conditions
// except the one type below the bridge adds to them. Each type has exactly
// one writer, so conditions never flap.
const (
	// ContractReadyCondition on an XR is True when the bridge has mapped it
	// onto the CAPI contract: Crossplane reports it Ready and Synced for its
	// current generation and its contract outputs are present and valid.
	// When False, its reason and message say what is missing: Crossplane's
	// own words (a composition error, unready resources) or what only the
	// bridge can see (a bad output, naming the field and the value; a closed
	// machine gate; credentials that may not be used).
	ContractReadyCondition = "ContractReady"

	// CrossplaneInfrastructureReadyCondition on a CAPI Cluster or Machine
	// copies the ContractReady condition of its infrastructure XR. CAPI's
	// InfrastructureReady mirrors only the XR's Ready, which Crossplane
	// writes and which carries neither composition errors (Crossplane puts
	// them in Synced) nor the bridge's findings; this condition carries both
	// to `kubectl describe cluster` and `clusterctl describe`.
	CrossplaneInfrastructureReadyCondition = "CrossplaneInfrastructureReady"

	// PausedCondition on an XR is True while CAPI pauses it (the Cluster's
	// spec.paused or the cluster.x-k8s.io/paused annotation), which the
	// bridge carries to Crossplane as crossplane.io/paused.
	PausedCondition = "Paused"

	// DeletingCondition on an XR is True while the bridge waits for its
	// composed resources to be deleted.
	DeletingCondition = "Deleting"

	// CredentialsReadyCondition on an XR says whether the credentials its
	// spec.providerConfigRef names may be used and are complete: the
	// referenced config exists (a ProviderConfig in the XR's own namespace,
	// or a ClusterProviderConfig granted to that namespace) and its
	// credentials secret exists. When False the XR is paused: nothing new is
	// composed with credentials the namespace may not use.
	CredentialsReadyCondition = "CredentialsReady"
)

// Reasons of the CredentialsReady condition.
const (
	// CredentialsReadyReason: the credentials may be used.
	CredentialsReadyReason = "Ready"
	// CompositionDefaultCredentialsReason: no providerConfigRef; the
	// composition's default applies.
	CompositionDefaultCredentialsReason = "CompositionDefault"
	// ProviderConfigNotFoundReason: the referenced config does not exist.
	ProviderConfigNotFoundReason = "ProviderConfigNotFound"
	// ProviderConfigNotGrantedReason: no grant lets the namespace use the
	// ClusterProviderConfig.
	ProviderConfigNotGrantedReason = "NotGranted"
	// CredentialsSecretNotFoundReason: the config's credentials secret does
	// not exist.
	CredentialsSecretNotFoundReason = "SecretNotFound"
	// CredentialsNotReadyReason on ContractReady: the XR waits for its
	// credentials.
	CredentialsNotReadyReason = "CredentialsNotReady"
)

// Reasons of the bridge's conditions. They are stable: messages carry the
// details.
const (
	// ContractReadyReason: provisioned and mapped.
	ContractReadyReason = "Ready"
	// WaitingForCompositionReason: Crossplane has not reported the XR Ready
	// for its current generation yet.
	WaitingForCompositionReason = "WaitingForComposition"
	// CompositionFailedReason: Crossplane reports the XR not Synced.
	CompositionFailedReason = "CompositionFailed"
	// MissingOutputsReason: Crossplane reports the XR Ready but a contract
	// output is missing.
	MissingOutputsReason = "MissingOutputs"
	// InvalidOutputsReason: a contract output is malformed.
	InvalidOutputsReason = "InvalidOutputs"
	// PausedReason: CAPI pauses the XR.
	PausedReason = "Paused"
	// NotPausedReason: CAPI does not pause the XR.
	NotPausedReason = "NotPaused"
	// DeletingReason: composed resources are being deleted.
	DeletingReason = "Deleting"
	// WaitingForMachinesReason: a cluster XR being deleted waits for its
	// cluster's Machines (and so their machine XRs) to be gone.
	WaitingForMachinesReason = "WaitingForMachines"

	// WaitingForClusterInfrastructureReason: a machine XR stays paused until
	// its cluster's infrastructure is provisioned.
	WaitingForClusterInfrastructureReason = "WaitingForClusterInfrastructure"
	// WaitingForBootstrapDataReason: a machine XR stays paused until its
	// Machine's bootstrap data secret is set.
	WaitingForBootstrapDataReason = "WaitingForBootstrapData"
	// InvalidFailureDomainReason: the Machine asks for a failure domain the
	// cluster does not have.
	InvalidFailureDomainReason = "InvalidFailureDomain"
)

// Finalizer is the bridge's finalizer on adapted XRs: it holds an XR until
// every resource it composed is gone, so nothing is orphaned.
const Finalizer = "capxp.dev/bridge"
