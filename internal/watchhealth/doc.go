// Package watchhealth knows, for every informer a role depends on — its
// gates', its admission listers', its watcher's, its Store's — how long it has
// been since the informer last heard from the API server, and heals one that
// has gone silent.
//
// An informer hears the API server when a list answers, when a watch is
// established, and on every watch event, bookmarks included. A watch connection
// can fall silent without an error: a half-open TCP connection behind a NAT or
// a load balancer that dropped it, or a stream the server stopped feeding.
// client-go then waits for its HTTP/2 health check (45 s) or, over HTTP/1.1,
// forever, while the informer's cache ages and nothing says so.
//
// A Tracker wraps each informer's list-watch. It asks the API server to end
// every watch after Renew (half the stale bound), so a healthy informer hears
// at least that often even on a quiet type; an informer that hears nothing for
// StaleAfter (DefaultStaleAfter, or VIGIL_WATCH_STALE_AFTER) is stale. Its
// watch is then ended and the role's connections to the API server closed, so
// the reflector watches again over a new connection from the last
// resourceVersion it saw: the API server replays every change since, or
// answers 410 Gone when its history no longer reaches back that far, and the
// reflector lists again. A list or a watch that gets no answer within
// StaleAfter is abandoned the same way and tried again at once, so that the
// reflector, which sees no failure, does not back off: the request in flight
// when the network returns completes then.
//
// Check is the readiness of a role: it names each stale informer and since
// when. Live fails only when a restart would help: an informer stale for
// RestartAfter whose own requests get no answer while the role's other
// requests do. A Tracker counts, per informer, its relists, its 429 answers
// (each one, client-go's own retries included, counted where the responses
// arrive), its watches re-established after one ended early, and its stalls;
// Collector exports them, with each informer's staleness, as metrics.
package watchhealth
