// Package store is a module's shared, cluster-wide key/value state: what its
// gates hand to the running module, and what its replicas share.
//
// The state lives in one namespaced custom resource per module
// (stores.vigil.dev, kind Store, named after the module). Reads come from an
// in-memory copy fed by a watch on that one object; they never call the API
// server. Writes are compare-and-swap updates on the object's resourceVersion:
// on a conflict the write is re-applied to the latest version and sent again,
// with jittered backoff, so no update is ever lost between goroutines or
// replicas. Concurrent writes of one replica are committed together, in one
// update, in the order they were made (group commit): throughput grows with the
// number of writers instead of collapsing into conflicts.
//
// SetAndWait returns once this replica's watch has delivered a version that
// contains the write (read-your-writes); a write that changes nothing returns
// at once. Subscribers see the final value of every key that changed, in the
// order the watch delivers versions; after a broken watch, a 410 Gone or a
// relist they see the difference between what they saw last and what is there
// now, so nothing is silently missed. If someone deletes the object,
// subscribers are told its keys are gone, and the next write creates it again.
//
// Keys match [-._a-zA-Z0-9]+. Each capability of a module sees its own scope
// (stored as "<capability>/<key>"); the module-wide scope holds the rest. The
// object's size is kept under 900 KiB, below etcd's request limit, and a write
// that would exceed it fails alone, naming the key and the sizes, with nothing
// written.
//
// NewLazy gives a Store that connects on first use, for gate callbacks and
// watcher handlers that may never touch it: a read, like a write, returns the
// error of a connection that failed (no RBAC, no CRD), and the next use tries
// again.
package store
