// Package soak holds vigil's soaks and long benchmarks against a real API
// server: registration under continuous creates (make soak-registration),
// decisions on fresh lister data (make soak-fresh), the admission role's
// outage windows, upgrades under a flood, and the watcher's throughput (make
// bench-watch). They use vigil's public API as a module would, and
// internal/testsupport/testkit for the harness they share with the facade's tests.
package soak
