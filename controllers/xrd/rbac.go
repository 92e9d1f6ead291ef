package xrd

// The manager's permissions, least privilege: `make manifests` generates
// config/rbac/role.yaml from these markers. What cannot be known when CAPXP
// is built (the XR kinds of platform teams' own XRDs, the kinds a composition
// composes, a provider's ProviderConfig kinds) is granted through the
// aggregated ClusterRole in config/rbac/aggregated.yaml: label a ClusterRole
// capxp.dev/aggregate-to-manager: "true" to add to it.

// XRDs: adapt them, complete their contract label, report on them.
// +kubebuilder:rbac:groups=apiextensions.crossplane.io,resources=compositeresourcedefinitions,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apiextensions.crossplane.io,resources=compositeresourcedefinitions/status,verbs=patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// Whether the bridge may work with a platform team's XR kind, before it
// watches it (every authenticated user holds this through system:basic-user;
// listed so that the role says what the bridge does).
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=selfsubjectaccessreviews,verbs=create

// clusterctl move: the CRDs of the kinds XRs compose get clusterctl's label
// (a server-side apply of that label alone; which kinds a composition
// composes is not known when CAPXP is built, so the verb cannot be limited
// by name). CAPI's core manager holds the same verb on every CRD.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=patch

// CAPXP's own XR kinds, and grants.
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=crossplaneclusters;crossplanemachines;crossplanemachinepools;crossplanecontrolplanes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=crossplaneclusters/status;crossplanemachines/status;crossplanemachinepools/status;crossplanecontrolplanes/status,verbs=patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=clusterproviderconfiggrants,verbs=get;list;watch
// The record of what each namespace's managed resources may name, which the
// API server's admission policy on managed resources reads.
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=namespacecredentials,verbs=get;list;watch;create;update

// CAPI's objects: read them, and write the one condition type the bridge
// owns on them.
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machines;machinepools,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters/status;machines/status;machinepools/status,verbs=patch

// Credentials: namespaces' labels for grants; only the existence of
// credentials Secrets (get, never list or watch): their metadata, and the
// data of a Secret a namespace's own ProviderConfig names, to judge whether
// it reaches an identity other than its own.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// A managed control plane's kubeconfig: the bridge reads the Secret its
// composition names (get, above) and writes the cluster's
// <cluster>-kubeconfig Secret, as every CAPI control plane provider does.
// Names vary by cluster, so the verbs cannot be limited by name; the bridge
// never lists or watches Secrets.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create;update

// Admission: the hold and release policies, the move and template
// immutability policies and the credentials webhook. Only the bridge's own
// objects, by name, may be read, changed or deleted (and the machines-only
// hold of an earlier release deleted); create cannot be limited by name.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingadmissionpolicies;mutatingadmissionpolicybindings;validatingadmissionpolicies;validatingadmissionpolicybindings;validatingwebhookconfigurations,verbs=create
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingadmissionpolicies;mutatingadmissionpolicybindings,verbs=get;patch;delete,resourceNames=capxp-hold-composites;capxp-keep-annotations-of-moved-objects;capxp-pause-new-machines
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;patch;delete,resourceNames=capxp-only-the-bridge-releases;capxp-immutable-templates;capxp-machine-parameters;capxp-credentials-where-used;capxp-credentials-locked;capxp-credentials-unknown-families;capxp-network-where-used;capxp-kubeconfig-content
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;patch;delete,resourceNames=capxp-credentials

// Lifting the hold on an XR: the admission policies let a user remove
// crossplane.io/paused, or change credentials without the hold coming back,
// only when RBAC grants it this verb (a virtual resource: nothing is stored).
// +kubebuilder:rbac:groups=capxp.dev,resources=holds,verbs=release

// Events and leader election.
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// The diagnostics endpoint authenticates and authorizes its callers.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
