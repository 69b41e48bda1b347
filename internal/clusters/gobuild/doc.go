// Package gobuild runs the go command and says how far it got while it runs:
// every heartbeat, the packages compiled so far (from -v) and the last one,
// or the modules downloaded; on failure, its last lines. The control plane's
// build and vigiltest's build of a module report through it.
package gobuild
