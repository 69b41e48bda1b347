// Package gaterun runs one phase of a module's startup gates, as its init
// container does (Run, the role's entry; RunPhase, the phase's gates as
// given): every gate of the phase at once, each until it is done, and
// the phase until every required gate is. It runs the phase's spec.Gate
// values: an object gate through internal/runtime/waitfor and then its callback, a
// Sample gate by sampling, both with the lazily connected Store.
//
// It owns what happens around a wait: a callback that fails is retried with
// backoff (the wait runs again first, so it sees the latest objects), an error
// marked gate.Permanent ends the phase at once, a gate's timeout skips it when
// it is optional, finishes it with its fallback when it has one, and otherwise
// ends the phase as timed out. While gates wait, each says every few seconds
// (through internal/runtime/progress, as `vigil wait` does) what it waits for, for how
// long and what it last saw; on changes of state it records an Event on its
// Pod; at the end it writes a summary to the termination-message file. Each
// gate's result is written atomically, as JSON, into the pod's handoff folder,
// where the main container reads it — so a rerun of a phase after a pod
// restart overwrites, never half-writes.
package gaterun
