package events

import "github.com/go-logr/logr"

// Key is the log key that holds an event's Name.
const Key = "event"

// Name names an event.
type Name string

// The events of a gate phase (keys "phase" and "gate" where they apply).
const (
	// PhaseStarted: a phase began; fields gates.
	PhaseStarted Name = "phase-started"
	// PhaseNoGates: a phase had nothing to wait for.
	PhaseNoGates Name = "phase-no-gates"
	// PhaseDone: every required gate of a phase is done; fields took.
	PhaseDone Name = "phase-done"
	// GateWaiting: a gate still waits; fields waitsFor, for, lastSeen.
	GateWaiting Name = "gate-waiting"
	// GateCallbackRunning: a gate saw what it waits for and its callback
	// runs; fields waitsFor, for, callbackFor.
	GateCallbackRunning Name = "gate-callback-running"
	// GateDone: a gate's outcome held; fields took.
	GateDone Name = "gate-done"
	// GateFallback: a gate timed out and finished with its fallback; fields
	// took.
	GateFallback Name = "gate-fallback"
	// GateSkipped: an optional gate timed out and was skipped; fields took.
	GateSkipped Name = "gate-skipped"
)

// The events of the admission role.
const (
	// AdmissionServing: the server listens; fields addr.
	AdmissionServing Name = "admission-serving"
	// AdmissionReady: the Store and listers have synced (and the server
	// listens); fields say how long each part of the start took, in ms
	// since the process started: init (the runtime and the command line,
	// up to the role), store (the Store CRD found: discovery and a first
	// read), listening (the certificate loaded, the port open),
	// store_synced, listers_synced, ready.
	AdmissionReady Name = "admission-ready"
	// WebhooksRegistered: the configurations are filled with failurePolicy
	// Ignore and the canary probes reachability.
	WebhooksRegistered Name = "webhooks-registered"
	// CanaryReached: the API server reached the module; fields attempts.
	CanaryReached Name = "canary-reached"
	// WebhooksEnforced: the failure policy is in force; fields failurePolicy.
	WebhooksEnforced Name = "webhooks-enforced"
	// WebhooksAlreadyRegistered: this version had registered them before.
	WebhooksAlreadyRegistered Name = "webhooks-already-registered"
	// WebhooksDrifted: a webhook configuration differs from the module's
	// spec (edited, emptied, wrong caBundle); fields drift. It is repaired.
	WebhooksDrifted Name = "webhooks-drifted"
	// WebhooksRepaired: a drifted configuration was written back; fields
	// drift, took.
	WebhooksRepaired Name = "webhooks-repaired"
	// WebhookConfigurationMissing: a configuration was deleted outright; it
	// is not re-created. Fields err.
	WebhookConfigurationMissing Name = "webhook-configuration-missing"
	// WebhooksReEnforced: webhooks that failed open during an outage are
	// enforced again: a replica serves.
	WebhooksReEnforced Name = "webhooks-re-enforced"
	// WebhooksProving: the webhooks stay enforced while a new client
	// configuration or caBundle is proven on the canary alone.
	WebhooksProving Name = "webhooks-proving"
	// RegistrationStuck: the canary has not reached the module for a while
	// (refused by another admission control, or unanswered); fields problem.
	RegistrationStuck Name = "registration-stuck"
	// RegistrationTakenOver: a newer version's admission Lease expired, so
	// this older version registers again; fields theirs, expired.
	RegistrationTakenOver Name = "registration-taken-over"
	// AuditViolation: an existing object violates a validation; fields kind,
	// namespace, name, violation.
	AuditViolation Name = "audit-violation"
	// AuditDone: the audit after registration finished; fields violations,
	// took, objects (judged), streams (lists streamed whole), pages (pages
	// listed, where a list was not streamed) and slowestPage (the longest
	// one page took).
	AuditDone Name = "audit-done"
	// AuditProgress: an audit still going, every 30 seconds; fields
	// objects, streams, pages, slowestPage and elapsed, as AuditDone's.
	AuditProgress Name = "audit-progress"
	// AuditFinding: a validation of a capability in Audit mode denied a
	// request, which was allowed; fields capability, binding, mode,
	// operation, kind, namespace, name, user, dryRun, violation.
	AuditFinding Name = "audit-finding"
	// Decision: a request the module's bindings answered; fields uid,
	// operation, kind, subresource, namespace, name, user, dryRun,
	// capability and binding (the one that denied or failed, else the last
	// that ran), verdict (allowed, denied, mutated, warned), message,
	// warnings, patch, took. A field cut at its bound (2 KiB for message,
	// warnings and patch, 256 bytes for the others from the request) is
	// followed by FIELDCut holding its whole length in bytes (patchCut,
	// messageCut, nameCut...); a line is at most 34 KiB.
	// At most VIGIL_DECISION_LOG lines a second, and a quarter as many dry
	// runs, shared fairly among users and namespaces; `vigil monitor`
	// follows them.
	Decision Name = "decision"
	// DecisionsUnlogged: decisions over the bound, or over a user's or a
	// namespace's share of it, were not logged; fields decisions, dryRuns
	// and denied (how many of them), second (when the first was left out),
	// bound, dryRunBound, share, and by: who was left out, most first
	// (`"USER" in "NAMESPACE": N (D dry runs, E denied)`, "; "-separated,
	// the first 10, then the others summed).
	DecisionsUnlogged Name = "decisions-unlogged"
)

// The events of the admission and watcher roles while the API server does
// not serve a kind their informers read yet (its CRD is not installed, or
// discovery lags behind its Established).
const (
	// KindWaiting: the role waits for a kind to be served; fields kind,
	// lastSeen, and for (how long so far) once it has waited a while.
	KindWaiting Name = "kind-waiting"
	// KindServed: a kind waited for is served; fields kind, took.
	KindServed Name = "kind-served"
)

// The events of the watcher role.
const (
	// AdmissionOutage: the canary reached no admission replica while
	// capabilities with an outage bound enforce; fields since, capabilities.
	AdmissionOutage Name = "admission-outage"
	// WebhooksFailedOpen: after their bound without a serving replica,
	// these capabilities' webhooks were set to failurePolicy Ignore; fields
	// webhooks, outage.
	WebhooksFailedOpen Name = "webhooks-failed-open"
	// WatcherReady: the informers synced; fields types, bindings, schedules.
	WatcherReady Name = "watcher-ready"
)

// Info logs the event name at info level, with msg for people and
// keysAndValues as the event's fields.
func Info(log logr.Logger, name Name, msg string, keysAndValues ...any) {
	log.Info(msg, append([]any{Key, string(name)}, keysAndValues...)...)
}
