package dev

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vigilkit/vigil/internal/runtime/events"
)

// gateEvent turns a gate process's log line into an event; ok is false for
// lines the timeline leaves out.
func gateEvent(phase int, f map[string]string) (e Event, ok bool) {
	e = Event{Role: fmt.Sprintf("phase %d", phase), Phase: phase, Gate: f["gate"]}
	switch events.Name(f[events.Key]) {
	case events.PhaseStarted, events.PhaseDone, events.PhaseNoGates:
		return e, false // the session reports these itself, from the process
	case events.GateWaiting:
		e.Kind, e.Seen = GateWaiting, f["lastSeen"]
		e.Text = fmt.Sprintf("gate %s waiting (%s): last saw %s", e.Gate, f["for"], e.Seen)
	case events.GateCallbackRunning:
		e.Kind, e.Seen = GateWaiting, "callback running"
		e.Text = fmt.Sprintf("gate %s saw what it waits for; its callback has run for %s", e.Gate, f["callbackFor"])
	case events.GateDone:
		e.Kind, e.State = GateDone, "done"
		e.Text = fmt.Sprintf("gate %s done after %s", e.Gate, f["took"])
	case events.GateFallback:
		e.Kind, e.State = GateDone, "fallback"
		e.Text = fmt.Sprintf("gate %s timed out after %s: finished with its fallback", e.Gate, f["took"])
	case events.GateSkipped:
		e.Kind, e.State = GateDone, "skipped"
		e.Text = fmt.Sprintf("gate %s timed out after %s: optional, skipped", e.Gate, f["took"])
	default:
		return logEvent(e, f)
	}
	return e, true
}

// admissionEvent turns an admission process's log line into an event.
func admissionEvent(f map[string]string) (e Event, ok bool) {
	e = Event{Role: "admission"}
	switch events.Name(f[events.Key]) {
	case events.AdmissionServing:
		e.Kind, e.Text = AdmissionServing, "serving on "+f["addr"]+"; registers its webhooks once ready"
	case events.WebhooksRegistered:
		e.Kind, e.Text = WebhooksRegistered, "webhooks registered with failurePolicy Ignore; probing that the API server reaches the module"
	case events.CanaryReached:
		e.Kind, e.Text = Log, "the API server reaches the module (its canary came back)"
	case events.WebhooksEnforced:
		e.Kind, e.Text = WebhooksEnforced, "webhooks enforced with failurePolicy "+f["failurePolicy"]
	case events.WebhooksAlreadyRegistered:
		e.Kind, e.Text = WebhooksEnforced, "webhooks already registered by this version of the module"
	case events.AuditDone:
		e.Kind, e.Text = Log, "audit of the objects admitted before registration: "+f["violations"]+" violations"
	case events.AuditViolation:
		e.Kind, e.Text = Problem, fmt.Sprintf("audit: %s %s/%s violates a validation: %s", f["kind"], f["namespace"], f["name"], f["violation"])
	default:
		return logEvent(e, f)
	}
	return e, true
}

// watcherEvent turns a watcher process's log line into an event.
func watcherEvent(f map[string]string) (e Event, ok bool) {
	e = Event{Role: "watcher"}
	if events.Name(f[events.Key]) == events.WatcherReady {
		e.Kind = WatcherReady
		e.Text = fmt.Sprintf("ready: %s, %s on %s", count(f["bindings"], "binding"), count(f["schedules"], "schedule"), count(f["types"], "shared informer"))
		return e, true
	}
	return logEvent(e, f)
}

// noise are library messages the timeline leaves out.
var noise = []string{
	"Starting ", "starting ", "Stopping ", "stopping ", "Waiting for", "http server", "attempting to acquire", "successfully acquired",
	"All workers finished", "Shutdown signal", "Serving ", "shutting down", "Wait completed",
}

// logEvent shows errors always, and the module's own info lines — those that
// carry the module's key and none of a library's.
func logEvent(e Event, f map[string]string) (Event, bool) {
	msg := f["msg"]
	if f["level"] == "ERROR" || f["level"] == "WARN" {
		e.Kind, e.Text = Problem, msg
		if err := f["err"]; err != "" {
			e.Text += ": " + err
		}
		return e, true
	}
	if f["level"] != "INFO" || f["module"] == "" || f["controller"] != "" || f["logger"] != "" {
		return e, false
	}
	for _, n := range noise {
		if strings.HasPrefix(msg, n) {
			return e, false
		}
	}
	e.Kind, e.Text = Log, msg
	for _, k := range slices.Sorted(maps.Keys(f)) {
		switch k {
		case "time", "level", "msg", "module", "phase", "gate", events.Key:
			continue
		}
		if f[k] == "" {
			continue
		}
		e.Text += " " + k + "=" + f[k]
	}
	return e, true
}

func count(n, what string) string {
	if n == "1" {
		return "1 " + what
	}
	return n + " " + what + "s"
}
