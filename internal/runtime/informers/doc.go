// Package informers is the shared-informer machinery every role that reads
// through a cache uses: the cache of the admission role's listers
// (StartCache), the watcher's informers (NewInformer, WatchErrorHandler,
// ByObject), the wait for the API server to serve a CRD's kind before an
// informer may select it (Served), warming up and waiting for sync
// (WarmUp), and the barriers that catch a lister up before a decision on
// fresh data (Barriers).
//
// Every type has one shared informer; it selects on the server (namespaces,
// labels, name) only what every user of the type agrees on (spec.Agree),
// and each user filters the rest in process. Cached objects lose their
// managed fields, and what many of them repeat — namespaces, labels,
// owners, a Pod's node, images and conditions — is held once (Transform).
// An object listed again at the resourceVersion its informer's store holds
// is the one held, so a relist holds again only what changed (Reuse). Each
// informer's list and watch report to the role's watch-health tracker, and
// expired watches and watch errors are counted (vigil_watch_errors_total).
package informers
