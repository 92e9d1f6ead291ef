// Package asginstances is a Crossplane composition function that reports
// the instances of the AWS Auto Scaling groups an XR composes, directly or
// through EKS managed node groups, as Cluster API provider IDs.
//
// A CrossplaneMachinePool on AWS composes provider-upjet-aws's
// AutoscalingGroup (autoscaling.aws.m.upbound.io) or NodeGroup
// (eks.aws.m.upbound.io), whose Terraform resources report no instances,
// while Cluster API needs spec.providerIDList. Run as a pipeline step after
// function-patch-and-transform, the function calls
// DescribeAutoScalingGroups for every observed AutoscalingGroup and for
// every Auto Scaling group an observed NodeGroup reports in
// status.atProvider.resources[*].autoscalingGroups[*].name, and writes
// aws:///<availability-zone>/<instance-id> of each instance launching or
// in service (Pending, Pending:Wait, Pending:Proceed, InService),
// deduplicated and sorted, to the desired XR's
// status.outputs.providerIDList. It takes no input.
//
// It calls AWS with exactly the credentials the managed resource's provider
// uses, so that a tenant's pool is listed with what the tenant was granted
// and nothing else: its spec.providerConfigRef names a namespace's
// ProviderConfig or a ClusterProviderConfig (aws.m.upbound.io/v1beta1),
// which the function reads, and then its Secret, as Crossplane required
// resources (requirement names "ProviderConfig/<namespace>/<name>",
// "ClusterProviderConfig/<name>" and "Secret/<namespace>/<name>"). As
// provider-aws does, a namespace's ProviderConfig names a Secret of its own
// namespace whatever its secretRef.namespace says; a ClusterProviderConfig
// names any. Only the Secret credentials source is read, optionally with
// spec.assumeRoleChain; the provider pod's identities (IRSA, WebIdentity,
// PodIdentity, Upbound) and the function's own environment are never used.
// spec.endpoint's Static and Auto URLs are honoured as provider-aws honours
// them, which lets the function run against an AWS emulator.
//
// Crossplane applies the desired XR's status with server-side apply, so
// whenever the function cannot make a fresh list (a group not named yet, a
// NodeGroup reporting no group yet, a resource not supplied yet, an AWS
// error) it writes back the observed list and asks to be called again after
// ProgressTTL; it asks for the same while the list's length differs from
// the sum of the groups' desired capacities, and for SettledTTL once it
// matches. Crossplane v2.4.0's XR reconciler honours that
// TTL: after a successful pipeline run it requeues the XR after the shortest
// non-zero TTL any step returned (jittered by up to 10 %) when realtime
// compositions are enabled, which they are by default
// (--enable-realtime-compositions), and otherwise polls every
// --poll-interval (1 minute), or at once while a composed resource is not
// ready.
package asginstances
