// Package controllers holds CAPXP's reconcilers. They read objects, call
// package bridge for the mapping (readiness, outputs, the machine gate,
// credentials, XRD checks), carry CAPI's life cycle (pause, deletion order,
// the provisioned milestone) themselves, and write only what changed. An xrdReconciler adapts every XRD that declares a CAPI contract:
// it keeps the admission objects (the machine gate policy and, when the
// manager serves it, the credentials webhook) up to date and starts, at run time, one InfraClusterReconciler or
// InfraMachineReconciler per adapted kind.
package controllers
