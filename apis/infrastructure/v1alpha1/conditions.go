package v1alpha1

// CrossplaneInfrastructureReadyCondition is the one condition type the bridge
// writes, and it writes it on CAPI's objects, never on an XR: every condition
// on an XR is Crossplane's on the real engine (it marks conditions it did not
// set Unknown after a fatal pipeline result and server-side-applies the
// conditions it read after a successful one), so a second writer there would
// fight it and trip its watch circuit breaker.
//
// On a CAPI Cluster or Machine it carries the bridge's verdict on the
// infrastructure XR: True when the XR satisfies its contract; otherwise why
// not, in Crossplane's words (a failing pipeline, unready resources) or in the
// bridge's (a missing or malformed output, a closed machine gate, credentials
// the namespace may not use, a deletion waiting for composed resources). CAPI
// mirrors the XR's Ready into InfrastructureReady, which carries neither a
// composition error (Crossplane puts it in Synced) nor the bridge's findings;
// this condition carries both to `kubectl describe cluster` and `clusterctl
// describe cluster`. A change to a verdict someone must act on is also
// recorded as a Warning event on the XR.
const CrossplaneInfrastructureReadyCondition = "CrossplaneInfrastructureReady"

// CrossplaneControlPlaneReadyCondition carries the bridge's verdict on a
// Cluster's control plane XR, as CrossplaneInfrastructureReady carries the
// one on its infrastructure XR: both are the Cluster's, each with one
// writer.
const CrossplaneControlPlaneReadyCondition = "CrossplaneControlPlaneReady"

// Reasons of a verdict about credentials.
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
	// SecretOutsideNamespaceReason: a namespaced ProviderConfig names a
	// credentials secret in another namespace, which the bridge does not look
	// up (and so does not reveal whether it exists).
	SecretOutsideNamespaceReason = "SecretOutsideNamespace"
	// SharedIdentityInSecretReason: a namespaced ProviderConfig's Secret
	// holds credentials that reach an identity other than the Secret's own
	// (a kubeconfig's exec plugin or token file, an AWS profile's
	// credential_process or role to assume from the provider's own
	// identity): the config is shared, and needs a grant like an ambient
	// source.
	SharedIdentityInSecretReason = "SharedIdentityInSecret"
	// NotJudgedYetReason: the namespace's ProviderConfig has not been
	// judged yet: the namespace's reads of credentials Secrets are rationed
	// and others came first.
	NotJudgedYetReason = "NotJudgedYet"

	// CredentialsSecretUnreadableReason: a Secret a namespace's own
	// ProviderConfig names cannot be read (its name is not a valid Secret
	// name, or reading it failed): the config is refused until it can be.
	CredentialsSecretUnreadableReason = "SecretUnreadable"

	// InvalidGrantReason: the ClusterProviderConfigGrants of a shared
	// config cannot be read (an invalid namespace selector): they grant
	// nothing.
	InvalidGrantReason = "InvalidGrant"
	// TooManyProviderConfigsReason: the namespace has more ProviderConfigs
	// than its record lists; the rest are not usable.
	TooManyProviderConfigsReason = "TooManyProviderConfigs"
)

// Reasons of the bridge's verdicts. They are stable: messages carry the
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
	// DeletingReason: composed resources are being deleted.
	DeletingReason = "Deleting"
	// NotControlledReason: an object named in spec.crossplane.resourceRefs
	// is not controlled by the XR; the bridge neither deletes nor waits for
	// it.
	NotControlledReason = "NotControlled"
	// WaitingForMachinesReason: a cluster XR being deleted waits for its
	// cluster's Machines (and so their machine XRs) to be gone.
	WaitingForMachinesReason = "WaitingForMachines"

	// WaitingForClusterInfrastructureReason: a machine XR stays paused until
	// its cluster's infrastructure is provisioned.
	WaitingForClusterInfrastructureReason = "WaitingForClusterInfrastructure"
	// WaitingForBootstrapDataReason: a machine XR stays paused until its
	// Machine's bootstrap data secret is set.
	WaitingForBootstrapDataReason = "WaitingForBootstrapData"
	// WaitingForControlPlaneReason: a machine pool XR whose MachinePool
	// needs no bootstrap data (its instances join the control plane by
	// themselves, as a managed node group's do) stays paused until the
	// cluster's control plane is initialized.
	WaitingForControlPlaneReason = "WaitingForControlPlane"
	// InvalidFailureDomainReason: the Machine asks for a failure domain the
	// cluster does not have.
	InvalidFailureDomainReason = "InvalidFailureDomain"
	// InvalidBootstrapDataRefReason: the machine XR came with a
	// spec.bootstrap.dataSecretRef that does not name its Machine's
	// bootstrap data; the bridge never composes it.
	InvalidBootstrapDataRefReason = "InvalidBootstrapDataRef"
	// InvalidProviderIDReason: the machine XR came with a spec.providerID
	// the bridge did not write (a machine's provider ID is its
	// Composition's to say, and could name another namespace's machine);
	// the bridge never composes it.
	InvalidProviderIDReason = "InvalidProviderID"

	// WaitingForKubeconfigReason: the Secret the control plane XR's
	// status.outputs.kubeconfig names, or its key, does not exist yet.
	WaitingForKubeconfigReason = "WaitingForKubeconfig"
	// InvalidKubeconfigReason: the Secret the control plane XR names holds
	// no usable kubeconfig.
	InvalidKubeconfigReason = "InvalidKubeconfig"
	// KubeconfigNotControlledReason: the cluster's kubeconfig Secret exists
	// and is not the control plane XR's to write.
	KubeconfigNotControlledReason = "KubeconfigNotControlled"
	// KubeconfigLockedReason: the cluster's kubeconfig Secret is one a
	// usable ProviderConfig of the namespace relies on
	// (NamespaceCredentials spec.locked); the bridge does not rewrite what
	// was judged as credentials.
	KubeconfigLockedReason = "KubeconfigLocked"
)

// ContractAdaptedCondition is the condition the bridge writes on an XRD that
// declares capxp.dev/contract: whether it adapted the XRD's kind. `kubectl
// describe xrd NAME` shows it. Crossplane's XRD controller updates the
// XRD's status read-modify-write and keeps conditions it does not own.
const ContractAdaptedCondition = "CAPIContractAdapted"

// Reasons of ContractAdaptedCondition.
const (
	// ContractAdaptedReason: the kind is adapted.
	ContractAdaptedReason = "Adapted"
	// WaitingForCRDReason: the XRD is labelled for CAPI; Crossplane has not
	// copied the label onto the CRD yet.
	WaitingForCRDReason = "WaitingForCRD"
	// UnknownContractReason: capxp.dev/contract names no contract.
	UnknownContractReason = "UnknownContract"
	// InvalidScopeReason: the XRD's XRs are not namespaced.
	InvalidScopeReason = "InvalidScope"
	// InvalidNamesReason: CAPI cannot find the CRD from the kind.
	InvalidNamesReason = "InvalidNames"
	// NoReferenceableVersionReason: no version is referenceable.
	NoReferenceableVersionReason = "NoReferenceableVersion"
	// MissingSchemaFieldReason: the schema lacks a field the contract needs.
	MissingSchemaFieldReason = "MissingSchemaField"
	// AdmissionUnavailableReason: the API server serves no admission
	// policies (Kubernetes before 1.36), so new XRs of the kind are not held
	// at admission until their credentials are checked. The bridge still
	// serves the kind and holds XRs whose credentials are denied.
	AdmissionUnavailableReason = "AdmissionUnavailable"
	// ForbiddenReason: the bridge may not read or write the XR kind (on an
	// XRD), or read a machine's cluster infrastructure (on a Machine); a
	// ClusterRole labelled capxp.dev/aggregate-to-manager grants it.
	ForbiddenReason = "Forbidden"
)

// Finalizer is the bridge's finalizer on adapted XRs: it holds an XR until
// every resource it composed is gone, so nothing is orphaned.
const Finalizer = "capxp.dev/bridge"
