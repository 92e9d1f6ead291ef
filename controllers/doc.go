// Package controllers holds CAPXP's reconcilers. They are thin: they read
// objects, call package bridge for every decision, and write only what
// changed. An XRDReconciler adapts every XRD that declares a CAPI contract:
// it keeps the admission objects (the machine gate policy, the credentials
// webhook) up to date and starts, at run time, one InfraClusterReconciler or
// InfraMachineReconciler per adapted kind.
package controllers
