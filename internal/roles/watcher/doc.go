// Package watcher runs a module's watch role: its Watch, Reconcile and
// Finalize bindings and its schedules, on controller-runtime's manager.
//
// Every type has one shared informer (internal/runtime/informers), used by
// every binding and lister of that type; the informer selects on the server
// (namespaces, labels, name) only what every user of the type agrees on, and
// each binding filters the rest in process. Cached objects lose their
// managed fields. Reconcile and Finalize
// bindings get a de-duplicating, rate-limited work queue each; Watch bindings
// see every event in order. Exactly one replica — the holder of the module's
// leader-election Lease — runs bindings and schedules; the others keep their
// informers warm to take over at once. Run runs the role from the module's
// resolved definition (internal/definition/spec); with capabilities that declared an
// outage bound, its leader also runs the watch for outages of the admission
// replicas (registration.WatchOutages).
package watcher
