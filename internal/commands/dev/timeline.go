package dev

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Kind is what an Event reports.
type Kind string

// The kinds of events a session reports.
const (
	Built              Kind = "built"               // the module's binary is built
	ClusterUp          Kind = "cluster-up"          // the cluster is reachable
	PhaseStarted       Kind = "phase-started"       // a gate phase's process started
	GateWaiting        Kind = "gate-waiting"        // a gate waits; Seen says what it last saw
	GateDone           Kind = "gate-done"           // a gate is done (State: done, fallback, skipped)
	PhaseDone          Kind = "phase-done"          // a gate phase's process exited 0
	AdmissionServing   Kind = "admission-serving"   // the admission role listens
	WebhooksRegistered Kind = "webhooks-registered" // registered with failurePolicy Ignore, probing
	WebhooksEnforced   Kind = "webhooks-enforced"   // the failure policy is in force
	WatcherReady       Kind = "watcher-ready"       // the watcher's informers synced
	Admitted           Kind = "admitted"            // an admission request was allowed
	Denied             Kind = "denied"              // an admission request was denied
	Log                Kind = "log"                 // a line of the module's own worth showing
	Problem            Kind = "problem"             // an error a role logged, or a role that failed
	Stopped            Kind = "stopped"             // the session is over
)

// Event is one thing that happened in a session.
type Event struct {
	At   time.Time
	Kind Kind
	// Role is who reported it: dev, cluster, phase N, admission, watcher.
	Role  string
	Phase int
	Gate  string
	// Seen is what a waiting gate last saw; State how a gate finished.
	Seen, State string
	// Text says what happened, in words.
	Text string
	// Review is the admission decision of Admitted and Denied.
	Review *Review
}

// Review is one admission request and its answer, as the proxy saw them.
type Review struct {
	Operation, Kind, Namespace, Name string
	// Webhook is mutate or validate.
	Webhook  string
	Allowed  bool
	Message  string
	Warnings []string
	// Patch holds the JSON patch's operations, one per entry ("add
	// /metadata/labels/app = web").
	Patch []string
	// RefusedBy is the API server's own policy (one of the module's
	// checks) that refused the request after the module's webhook allowed
	// it, RefusedMessage its answer; empty when none did.
	RefusedBy, RefusedMessage string
}

// Object is namespace/name, or the name alone.
func (r *Review) Object() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// Printer writes events as a timeline: seconds since the start, who, what.
type Printer struct {
	Out   io.Writer
	Color bool
	// Start is the time offsets are counted from.
	Start time.Time
	// GateProgress is how often waiting gates report (vigil dev
	// --gate-progress): a gate that still sees the same is printed at this
	// interval. Every five seconds when zero.
	GateProgress time.Duration

	mu      sync.Mutex
	waiting map[string]waitPrinted
}

type waitPrinted struct {
	seen string
	at   time.Time
}

const (
	reset  = "\x1b[0m"
	bold   = "\x1b[1m"
	dim    = "\x1b[2m"
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	blue   = "\x1b[34m"
	cyan   = "\x1b[36m"
)

// repeatAfter is the least time between two lines of a waiting gate that
// saw the same: a quarter less than the interval of its reports, which come
// from another process and drift by some milliseconds.
func (p *Printer) repeatAfter() time.Duration {
	if p.GateProgress <= 0 {
		return 5 * time.Second
	}
	return p.GateProgress - p.GateProgress/4
}

// Print writes one event. A waiting gate is printed when what it saw
// changes, and otherwise every GateProgress.
func (p *Printer) Print(e Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Kind == GateWaiting && e.Seen != "" {
		if p.waiting == nil {
			p.waiting = map[string]waitPrinted{}
		}
		last, ok := p.waiting[e.Gate]
		if ok && last.seen == e.Seen && e.At.Sub(last.at) < p.repeatAfter() {
			return
		}
		p.waiting[e.Gate] = waitPrinted{seen: e.Seen, at: e.At}
	}
	colour := ""
	switch e.Kind {
	case PhaseDone, WebhooksEnforced, WatcherReady, Admitted:
		colour = green
	case GateDone:
		colour = green
		if e.State != "done" {
			colour = yellow
		}
	case Denied:
		colour = red
	case Problem:
		colour = red + bold
	case GateWaiting:
		colour = yellow
	case PhaseStarted, ClusterUp, Built, AdmissionServing, WebhooksRegistered:
		colour = cyan
	case Log:
		colour = dim
	case Stopped:
		colour = bold
	}
	at := fmt.Sprintf("%6.1fs", e.At.Sub(p.Start).Seconds())
	role := fmt.Sprintf("%-10s", e.Role)
	text := e.Text
	if p.Color {
		at = dim + at + reset
		role = blue + role + reset
		if colour != "" {
			text = colour + text + reset
		}
	}
	lines := strings.Split(text, "\n")
	fmt.Fprintf(p.Out, "%s  %s %s\n", at, role, lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(p.Out, "%s  %s %s\n", strings.Repeat(" ", 7), strings.Repeat(" ", 10), l)
	}
}

// describe is the timeline's sentence for an admission decision.
func (r *Review) describe() string {
	var b strings.Builder
	verb := "admitted"
	switch {
	case !r.Allowed:
		verb = "denied"
	case r.RefusedBy != "":
		verb = "allowed by the module's webhook, then refused by the API server's policy " + r.RefusedBy
	}
	fmt.Fprintf(&b, "%s %s %s (%s): %s", r.Operation, r.Kind, r.Object(), r.Webhook, verb)
	if !r.Allowed && r.Message != "" {
		fmt.Fprintf(&b, ": %s", r.Message)
	}
	if r.RefusedBy != "" {
		fmt.Fprintf(&b, ": %s", r.RefusedMessage)
	}
	for _, p := range r.Patch {
		fmt.Fprintf(&b, "\n  patch: %s", p)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "\n  warning: %s", w)
	}
	return b.String()
}
