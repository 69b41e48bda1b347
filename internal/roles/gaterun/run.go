package gaterun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/handoff"
	"github.com/vigilkit/vigil/internal/runtime/progress"
	"github.com/vigilkit/vigil/internal/runtime/waitfor"
	"github.com/vigilkit/vigil/store"

	"github.com/vigilkit/vigil/internal/runtime/events"
)

// Seen reports what a waiting gate saw: found is true when it saw what it
// waits on (the object, a sample) but not yet as wanted.
type Seen func(found bool, what string)

// EventSink records Kubernetes Events on the gate's Pod.
type EventSink interface {
	Event(warning bool, reason, message string)
}

// PhaseOptions configure RunPhase: what Run gives it, or a test.
type PhaseOptions struct {
	Log logr.Logger
	// Interval between progress lines of a waiting gate; 5s when zero.
	Interval time.Duration
	// HandoffDir receives one JSON file per gate; none is written when empty.
	HandoffDir string
	// TerminationLog receives the phase's summary; none when empty.
	TerminationLog string
	// Events, when set, receives state changes.
	Events EventSink
	// Waiter waits for object gates; a phase of Sample gates needs none.
	Waiter *waitfor.Waiter
	// Store is what gate callbacks are given.
	Store store.Store
	// Context, when set, gives callbacks' context what the facade's
	// ...From(ctx) accessors read.
	Context func(context.Context) context.Context
}

// run waits for one gate and runs its callback; it returns the result to
// hand off. seen is told what the wait last saw.
func (o *PhaseOptions) run(ctx context.Context, g *spec.Gate, seen Seen) (any, error) {
	ctx = o.context(ctx)
	// A Sample gate marks its callback itself (progress.CallbackRunning).
	if g.Sample != nil {
		return g.Sample(ctx, seen, o.Store)
	}
	if o.Waiter == nil {
		return nil, gate.Permanent(fmt.Errorf("gate %s waits for %s, but the runner has no API server to watch", g.Name, g.WaitsFor))
	}
	objs, err := o.Waiter.Wait(ctx, g.Wait, func(p waitfor.Progress) { seen(p.State == waitfor.StateNotMatching, p.Seen) })
	if err != nil {
		if errors.Is(err, waitfor.ErrForbidden) || errors.Is(err, waitfor.ErrNotServable) {
			return nil, gate.Permanent(err)
		}
		return nil, err
	}
	defer progress.CallbackRunning(ctx)()
	return g.Finish(ctx, objs, o.Store)
}

func (o *PhaseOptions) context(ctx context.Context) context.Context {
	if o.Context == nil {
		return ctx
	}
	return o.Context(ctx)
}

// ErrCanceled ends a phase stopped (SIGTERM, a canceled context) before its
// required gates were done: nothing of theirs was handed off, so the phase
// did not pass.
var ErrCanceled = errors.New("canceled")

// Outcome is how one gate ended.
type Outcome struct {
	Gate  string
	State string // done, fallback, skipped, timed out, failed, canceled
	Took  time.Duration
	Err   error
}

// RunPhase runs the gates of one phase and returns when all required ones are
// done or one has failed. The error wraps spec.ErrTimedOut when a gate timed out.
func RunPhase(ctx context.Context, phase int, gates []spec.Gate, opts PhaseOptions) ([]Outcome, error) {
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	log := opts.Log.WithValues("phase", phase)
	began := time.Now()
	if len(gates) == 0 {
		events.Info(log, events.PhaseNoGates, "phase has no gates")
		writeTermination(opts.TerminationLog, fmt.Sprintf("phase %d: no gates\n", phase))
		return nil, nil
	}
	events.Info(log, events.PhaseStarted, "phase started", "gates", len(gates))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	outcomes := make([]Outcome, len(gates))
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for i, g := range gates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := runGate(ctx, phase, &g, &opts, log.WithValues("gate", g.Name))
			outcomes[i] = o
			if o.Err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("gate %s: %w", g.Name, o.Err)
					cancel(firstErr)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took := time.Since(began)
	if firstErr == nil {
		firstErr = canceled(ctx, outcomes)
	}
	summary := summarize(phase, outcomes, took, firstErr)
	writeTermination(opts.TerminationLog, summary)
	if firstErr != nil {
		log.Error(firstErr, "phase failed", "took", took.Round(time.Millisecond).String())
		return outcomes, firstErr
	}
	events.Info(log, events.PhaseDone, "phase done", "took", took.Round(time.Millisecond).String())
	return outcomes, nil
}

// canceled is the error of a phase whose gates were stopped, with no gate
// failing, before they were done; nil when every gate ended.
func canceled(ctx context.Context, outcomes []Outcome) error {
	var names []string
	for _, o := range outcomes {
		if o.State == "canceled" {
			names = append(names, o.Gate)
		}
	}
	if len(names) == 0 {
		return nil
	}
	why := "the process was stopped"
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		why = cause.Error()
	}
	return fmt.Errorf("%w before gate(s) %s were done (%s): nothing of theirs was handed off; the phase did not pass",
		ErrCanceled, strings.Join(names, ", "), why)
}

func runGate(ctx context.Context, phase int, g *spec.Gate, opts *PhaseOptions, log logr.Logger) Outcome {
	began := time.Now()
	gctx := ctx
	if g.Timeout > 0 {
		var cancel context.CancelFunc
		gctx, cancel = context.WithTimeoutCause(ctx, g.Timeout, fmt.Errorf("%w after %s", spec.ErrTimedOut, g.Timeout))
		defer cancel()
	}
	st := &state{log: log, events: opts.Events, gate: g, phase: phase, began: began}
	st.set("Waiting", fmt.Sprintf("gate %s (phase %d) waits for %s", g.Name, phase, g.WaitsFor), false)
	prog := progress.New(func(l progress.Line) {
		if l.Callback > 0 {
			events.Info(log, events.GateCallbackRunning, "gate callback running", "waitsFor", l.What, "for", l.Waited.Round(time.Second).String(), "callbackFor", l.Callback.Round(100*time.Millisecond).String())
			return
		}
		events.Info(log, events.GateWaiting, "gate waiting", "waitsFor", l.What, "for", l.Waited.Round(time.Second).String(), "lastSeen", seenOrNothing(l.Seen))
	})
	st.item = prog.Add(g.WaitsFor, "")
	gctx = progress.WithItem(gctx, st.item)
	stop := prog.Start(opts.Interval)
	defer stop()

	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 1 << 30, Cap: 30 * time.Second}
	for {
		result, err := opts.run(gctx, g, st.saw)
		if err == nil {
			if err := writeHandoff(opts.HandoffDir, g, "done", result); err != nil {
				return st.end("failed", err)
			}
			st.set("Done", fmt.Sprintf("gate %s done after %s", g.Name, time.Since(began).Round(time.Millisecond)), false)
			return st.end("done", nil)
		}
		if gate.IsPermanent(err) {
			st.set("Failed", fmt.Sprintf("gate %s failed: %v", g.Name, err), true)
			return st.end("failed", err)
		}
		if gctx.Err() != nil {
			cause := context.Cause(gctx)
			if !errors.Is(cause, spec.ErrTimedOut) {
				// Another gate of the phase failed, or the process stops.
				st.set("Canceled", fmt.Sprintf("gate %s stopped before it was done (last seen: %s)", g.Name, st.lastSeen()), true)
				return st.end("canceled", nil)
			}
			return timedOut(ctx, g, opts, st)
		}
		d := backoff.Step()
		log.Error(err, "gate callback failed; retrying", "in", d.Round(time.Millisecond).String())
		st.saw(true, "callback failed: "+err.Error())
		select {
		case <-gctx.Done():
		case <-time.After(d):
		}
	}
}

// timedOut finishes a gate whose time ran out: with its fallback, skipped when
// optional, or as the phase's failure.
func timedOut(ctx context.Context, g *spec.Gate, opts *PhaseOptions, st *state) Outcome {
	switch {
	case g.OnTimeout != nil:
		result, err := g.OnTimeout(opts.context(ctx), opts.Store)
		if err != nil {
			st.set("Failed", fmt.Sprintf("gate %s timed out after %s and its fallback failed: %v", g.Name, g.Timeout, err), true)
			return st.end("failed", fmt.Errorf("timed out after %s; fallback: %w", g.Timeout, err))
		}
		if err := writeHandoff(opts.HandoffDir, g, "fallback", result); err != nil {
			return st.end("failed", err)
		}
		st.set("TimedOut", fmt.Sprintf("gate %s timed out after %s (last seen: %s); finished with its fallback", g.Name, g.Timeout, st.lastSeen()), true)
		return st.end("fallback", nil)
	case g.Optional:
		if err := writeHandoff(opts.HandoffDir, g, "skipped", nil); err != nil {
			return st.end("failed", err)
		}
		st.set("TimedOut", fmt.Sprintf("optional gate %s timed out after %s (last seen: %s); skipped", g.Name, g.Timeout, st.lastSeen()), true)
		return st.end("skipped", nil)
	default:
		err := fmt.Errorf("%w after %s waiting for %s (last seen: %s)", spec.ErrTimedOut, g.Timeout, g.WaitsFor, st.lastSeen())
		st.set("TimedOut", fmt.Sprintf("gate %s %v", g.Name, err), true)
		return st.end("timed out", err)
	}
}

// state tracks one gate for logs and Events; its progress item holds what
// the gate last saw.
type state struct {
	log    logr.Logger
	events EventSink
	gate   *spec.Gate
	phase  int
	began  time.Time
	item   *progress.Item

	mu     sync.Mutex
	reason string
}

func (s *state) saw(found bool, what string) {
	if changed := s.item.See(what); !changed || what == "" {
		return
	}
	s.log.V(1).Info("gate saw", "seen", what)
	if found {
		s.set("Seen", fmt.Sprintf("gate %s (phase %d) waits for %s; seen, not as wanted yet: %s", s.gate.Name, s.phase, s.gate.WaitsFor, what), false)
	} else {
		s.set("Waiting", fmt.Sprintf("gate %s (phase %d) waits for %s; %s", s.gate.Name, s.phase, s.gate.WaitsFor, what), false)
	}
}

func (s *state) lastSeen() string { return seenOrNothing(s.item.Seen()) }

func seenOrNothing(seen string) string {
	if seen == "" {
		return "nothing yet"
	}
	return seen
}

// set records a change of state as an Event; repeats of one state are not
// recorded again, however what was seen changes.
func (s *state) set(reason, msg string, warning bool) {
	s.mu.Lock()
	same := reason == s.reason
	s.reason = reason
	s.mu.Unlock()
	if same || s.events == nil {
		return
	}
	s.events.Event(warning, "Gate"+reason, msg)
}

// gateEnded is the event of each way a gate ends well.
var gateEnded = map[string]events.Name{"done": events.GateDone, "fallback": events.GateFallback, "skipped": events.GateSkipped}

func (s *state) end(how string, err error) Outcome {
	took := time.Since(s.began)
	if err == nil && how != "canceled" {
		events.Info(s.log, gateEnded[how], "gate "+how, "took", took.Round(time.Millisecond).String())
	}
	return Outcome{Gate: s.gate.Name, State: how, Took: took, Err: err}
}

// writeHandoff writes a gate's result for the main container: see
// internal/runtime/handoff.
func writeHandoff(dir string, g *spec.Gate, state string, result any) error {
	return handoff.Write(dir, g.Name, g.Phase, state, result)
}

// MaxTermination is the most the kubelet keeps of a termination message.
const MaxTermination = 4096

func summarize(phase int, outcomes []Outcome, took time.Duration, err error) string {
	var b strings.Builder
	verdict := "done"
	if err != nil {
		verdict = "failed"
		if errors.Is(err, spec.ErrTimedOut) {
			verdict = "timed out"
		}
		if errors.Is(err, ErrCanceled) {
			verdict = "canceled"
		}
	}
	fmt.Fprintf(&b, "phase %d %s in %s\n", phase, verdict, took.Round(time.Millisecond))
	sorted := append([]Outcome(nil), outcomes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Gate < sorted[j].Gate })
	for _, o := range sorted {
		fmt.Fprintf(&b, "%s: %s (%s)", o.Gate, o.State, o.Took.Round(time.Millisecond))
		if o.Err != nil {
			fmt.Fprintf(&b, ": %v", o.Err)
		}
		b.WriteByte('\n')
	}
	s := b.String()
	if len(s) > MaxTermination {
		s = s[:MaxTermination-4] + "...\n"
	}
	return s
}

func writeTermination(path, summary string) {
	if path == "" {
		return
	}
	_ = os.WriteFile(path, []byte(summary), 0o644)
}
