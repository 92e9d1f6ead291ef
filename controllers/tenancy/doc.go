// Package tenancy is what each namespace may use: its NamespaceCredentials
// record, kept by the Records reconciler (records.go; one reconcile observes
// in reconcile.go and judge.go, decides in decide.go, and writes in write.go),
// the admission policies that enforce the record where credentials are used
// (policy.go, built in controllers/policies), and the revocation that pauses
// what a withdrawn grant reaches (revoke.go). Condition reasons and
// annotations that are API live in apis/infrastructure/v1alpha1; the
// record's own annotations (revocation pending, locked at) and the
// reconciler's timings (lockSettles, revocationSettles, conflictRequeue) are
// in reconcile.go.
//
// State, all of it on Records, for the manager's life: the kinds watched
// (watched, watchedMarked), the cache of managed resources marked revoked
// (marked), the managed kinds logged unreadable once (unreadable), when
// each namespace's configs were first seen and their Secrets last read
// (lastRead, pruned to the configs the namespace has at each reconcile), and
// the namespaces whose marked managed resources changed since their last
// reconcile (rescan, taken by it). The record itself, on the API server, is
// the state that matters: a restart loses only the order of reads.
package tenancy
