// Package tenancy is what each namespace may use: its NamespaceCredentials
// record, kept by the Records reconciler (records.go; one reconcile observes
// in reconcile.go and judge.go, decides in decide.go, and writes in write.go),
// the admission policies that enforce the record where credentials are used
// (policy.go, built in controllers/policies), and the revocation that pauses
// what a withdrawn grant reaches (revoke.go). Condition reasons and
// annotations that are API live in apis/infrastructure/v1alpha1.
package tenancy
