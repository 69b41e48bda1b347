// Package udscore installs examples/uds-core, UDS Core's policy engine on
// vigil, into a test's control plane as UDS Core's own tests meet it, for
// vigil's benchmarks of it (test/uds-core, test/scale).
package udscore
