// Package fresh makes admission decisions on data at least as fresh as the
// request. A lister reads an informer's cache, which lags the API server by
// however long its watch events take to arrive: a Pod created right after
// its Exemption may meet a cache that has not seen the Exemption yet, and a
// Pod created right after an Exemption's deletion may meet one that still
// holds it.
//
// Reads records, for one binding's run on one request, which listers the
// binding read and whether a read found an object; the admission engine
// carries it in the request's context (internal/runtime/callctx). A decision that
// cached data may have changed — a denial, or an allow after a lister read
// found something (the exception case) — is made again once every lister the
// binding read has caught up; ordinary allows stay on the fast path.
//
// Reads also records what each read looked at, its Scope: a Get, one key; a
// List, its namespace and labels. A Barrier, one per lister type, catches
// its cache up on a scope. Its round trip is a consistent read of that
// scope's metadata from the API server (a paginated list with no
// resourceVersion, selecting what the informer selects and, within it, the
// scope's namespace, labels and name: the API server serves it at least as
// fresh as etcd at that moment), after which the cache has caught up once
// its store has seen that resourceVersion, or once it holds every listed
// object at its listed resourceVersion or newer and nothing else of the
// scope the list no longer has (unless created after the list). So a
// recheck costs what its decision read, not what the type holds
// cluster-wide: at 50,000 Pods a read by key's round trip reads one Pod's
// metadata, where the whole type's reads 100 pages (make bench-recheck). A
// binding that read more than a few scopes of one type is caught up on the
// whole type, in one round trip. Waiting for the resourceVersion alone is
// not enough on a quiet type: the API server sends watch bookmarks about
// once a minute, so the cache would learn it has caught up long after it
// has. Concurrent waiters on one scope share one round trip: at most one is
// in flight per scope, and waiters arriving while it flies share the next
// one, which starts when it lands — a round trip that began before a
// request came is never taken as fresh for it. At most 4 scopes of a type
// fly at once; a waiter on another scope beyond them shares the whole
// type's round trip, so a flood of rechecks, each of another object, costs
// the API server a bounded number of round trips at once. Waiters give up
// at their own deadline.
package fresh
