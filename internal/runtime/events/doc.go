// Package events names what a module's roles report as it happens, so that
// tools read it without parsing sentences: each event is a log line whose
// "event" key holds one of the Names below, with the fields its constant's
// comment lists; the line's message is for people and may be reworded
// freely. vigil dev builds its timeline from these.
package events
