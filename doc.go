// Package vigil is the API a Kubernetes module is written with: one Go program
// that admits, watches, reconciles and schedules, and holds back its own start
// until the cluster is ready for it. Its binary runs in every role:
//
//	m := vigil.NewModule("uds-core", vigil.Options{Namespace: "uds-system"})
//
// Gates (WaitFor, Sample) run as init containers, one per phase. Capabilities
// group admission bindings (When(...).Mutate/Validate/Require), served by
// `<module> admission`, and watch bindings (Watch(...).OnEvent/Reconcile/
// Finalize) and schedules (OnSchedule), run by `<module> watcher` on the
// replica holding the module's Lease. NewLister gives handlers a live read
// cache, the Store shared state (StoreFrom), ClientFrom the API server.
//
// This package holds declarations only: their checks are internal/definition/define's,
// the resolved definition internal/definition/spec's. A declaration never returns an
// error: a mistake is recorded with the author's file and line and reported by
// Verify, `plan` and Run, before anything starts.
package vigil
