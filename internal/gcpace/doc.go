// Package gcpace paces the Go garbage collector of a process whose live
// heap is small and whose requests allocate briskly, as an admission
// server's: Go's default (GOGC=100) collects each time the heap doubles, so
// a live heap of a few MiB under load is collected many times a second, at
// a fifth of the CPU a request costs.
//
// Start lets the heap grow by up to Headroom beyond what is live before the
// next collection — GOGC up to MaxPercent while the live heap is small — and
// falls back to Go's default once the live heap is Headroom or more, so
// that a process holding much (under abuse, say) collects exactly as it
// would by default. The GC percent is set again after every collection.
// GOGC in the environment turns it off.
package gcpace
