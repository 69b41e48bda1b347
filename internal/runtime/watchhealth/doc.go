// Package watchhealth knows, for every informer a role depends on — its
// gates', its admission listers', its watcher's — how long it has
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
// StaleAfter (DefaultStaleAfter, or VIGIL_WATCH_STALE_AFTER) is stale. The
// watch the reflector gets resumes itself: when the server ends it, when its
// connection drops, and when it is stale (the role's connections to the API
// server closed first, so that it does not go down the same dead one), it
// watches again from the last resourceVersion it passed on, and the API server
// replays every change since. The reflector sees one long watch, so it never
// backs off for these, which it would with a delay growing to a minute; an
// error answer (410 Gone when the server's history no longer reaches back that
// far) is passed on, and the reflector lists. A list or a watch that gets no
// answer within StaleAfter is abandoned and tried again at once, for the same
// reason: the request in flight when the network returns completes then.
//
// Check is the readiness of a role: it names each stale informer and since
// when. Live fails only when a restart would help: an informer stale for
// RestartAfter whose own requests get no answer while the role's other
// requests do. A Tracker counts, per informer, its relists, its 429 answers
// (each one, client-go's own retries included, counted where the responses
// arrive), its watches re-established after one ended early, and its stalls;
// Collector exports them, with each informer's staleness, as metrics.
package watchhealth
