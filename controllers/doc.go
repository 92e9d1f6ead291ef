// Package controllers holds CAPXP's reconcilers. They are thin: they read
// objects, call package bridge for every decision, and write only what
// changed. An XRDReconciler adapts every XRD that declares a CAPI contract and
// starts, at run time, one InfraClusterReconciler per adapted kind.
package controllers
