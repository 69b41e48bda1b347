// Package vigil is the API a Kubernetes module is written with: one Go program
// that admits (mutates and validates), watches, reconciles and schedules, and
// that holds back its own start until the cluster is ready for it.
//
// A module is declared once and run in different roles by its own binary:
//
//	m := vigil.NewModule("uds-core", vigil.Options{Namespace: "uds-system"})
//
// Startup gates (WaitFor, Sample) hold the module back until the cluster is
// ready for it; each phase runs as an init container (`<module> gate --phase
// N`). Capabilities group admission bindings (When(...).Mutate/Validate),
// served by `<module> admission`, which registers its webhook configurations
// only once it is ready and reachable. The same When chain declares Watch,
// Reconcile and Finalize bindings, and OnSchedule declares schedules: `<module>
// watcher` runs them on shared informers, on the one replica that holds the
// module's Lease. NewLister gives handlers of every role a live read cache. A
// Store keeps state the module's replicas share; callbacks and handlers find
// theirs with StoreFrom, and the API server with ClientFrom. Run gives the
// module's binary these roles, and `plan` prints what the module will do.
//
// This package is the facade: it holds only the entry points a module author
// uses. The definition is resolved once (internal/spec) and every role and
// tool reads that. Declarations never return
// errors; the first mistake is recorded with the file and line of the call that
// made it and reported when the module is validated or run, so a module with a
// bad definition fails at start and says where.
package vigil
