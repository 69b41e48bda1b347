// Package warming retries, quickly, the reads an API server turns away while
// the watch cache of their resource is still being built.
//
// The API server builds a resource's watch cache when it starts and, for a
// custom resource, on the first request after its CRD is established (or
// after it restarts). Until the cache has its first list — a few
// milliseconds — a list with a field selector and every watch are answered
// 429 "storage is (re)initializing" with Retry-After: 1, and client-go waits
// that full second before it asks again. A module whose Store or listers are
// read first thing at start would be ready a second late for it, every time
// the resource is new to the API server. Wrap asks again after 5 ms, then
// 10, 20 ... at most 100 ms apart, for as long as the Retry-After allows,
// and hands client-go the 429 only if the cache is still not ready by then.
package warming
