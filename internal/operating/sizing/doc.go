// Package sizing says what a module's informers will hold on a given
// cluster, before it is installed there: `plan --cluster` counts the
// objects each informer of each role selects, measures the heap one of them
// takes as the informer holds it (decoding a sample of the cluster's own
// objects, whole or as metadata, managed fields dropped), and compares what
// the role would need, during a relist too, with its memory limit.
//
// The constants are measured: a role's idle RSS (make bench-admission's
// rss_idle) and a relist's peak over steady (make bench-scale's
// relist_peak_mib, docs/scale.md).
package sizing
