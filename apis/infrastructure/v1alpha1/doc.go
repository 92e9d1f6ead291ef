// Package v1alpha1 holds the Go types of CAPXP's InfraCluster, InfraMachine,
// InfraMachinePool and ControlPlane contracts: the composite resources (XRs)
// CrossplaneCluster, CrossplaneMachine, CrossplaneMachinePool and
// CrossplaneControlPlane, whose Crossplane v2 CompositeResourceDefinitions are
// generated from these types, and the plain CRDs of their templates
// (CrossplaneClusterTemplate, CrossplaneMachineTemplate,
// CrossplaneMachinePoolTemplate, CrossplaneControlPlaneTemplate), which CAPI
// clones into those XRs.
//
// Every field says who writes it:
//
//   - user: the person or the CAPI template that creates the object;
//   - bridge: CAPXP's bridge controller, under its own server-side apply field
//     manager;
//   - composition: the Composition's function pipeline, which may only write an
//     XR's status;
//   - Crossplane: Crossplane core (spec.crossplane and status.conditions).
//
// The composite resources are "views": Crossplane owns spec.crossplane and
// status.conditions and adds their schema itself when it turns the XRD into a
// CRD, so the XRD generator leaves them out of the XRD schema.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package v1alpha1
