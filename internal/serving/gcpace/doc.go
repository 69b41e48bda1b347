// Package gcpace paces the Go garbage collector of a process whose live
// heap is small and whose requests allocate briskly, as an admission
// server's: Go's default (GOGC=100) collects each time the heap doubles, so
// a live heap of a few MiB under load is collected many times a second, at
// a fifth of the CPU a request costs.
//
// Start lets the heap grow by up to Headroom beyond what is live before the
// next collection: GOGC up to MaxPercent while the live heap is small, Go's
// default (100) when it is Headroom, and less as it grows beyond, down to
// MinPercent (a heap at most half again what is live). A process holding
// much — an admission server under a burst of large reviews, say — thus
// collects before its heap doubles, rather than leaving GOMEMLIMIT to stop
// it near its container's limit, which a starved collector can overshoot.
// The GC percent is set again after every collection. GOGC in the
// environment turns it off.
//
// StartHolding paces a process whose heap is mostly what it holds, as a
// watcher's informers' caches, the same way but never above Go's default:
// a small heap is collected as Go would, and one beyond Headroom sooner, so
// that a relist, which holds a new copy of each cache beside the old one,
// does not double it.
package gcpace
