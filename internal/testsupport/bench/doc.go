// Package bench is vigil's own load and measurement harness, which its
// benchmarks, soaks and abuse tests share and a module author does not
// need: the floor server (the least an HTTPS admission server can cost,
// beside which vigil's figures are read), load at a fixed concurrency with
// each server's CPU per request, connection floods, latency percentiles,
// /proc figures and Prometheus metrics read from a /metrics page. What an
// author uses is in vigiltest.
package bench
