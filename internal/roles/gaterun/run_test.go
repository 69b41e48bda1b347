package gaterun_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/roles/gaterun"
	"github.com/vigilkit/vigil/internal/runtime/handoff"
	"github.com/vigilkit/vigil/internal/runtime/progress"
	"github.com/vigilkit/vigil/store"
)

type events struct {
	mu  sync.Mutex
	all []string
}

func (e *events) Event(warning bool, reason, msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, reason)
}

func (e *events) reasons() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.all, ",")
}

func opts(t *testing.T) (gaterun.PhaseOptions, *events) {
	ev := &events{}
	return gaterun.PhaseOptions{
		Log:            logr.Discard(),
		Interval:       50 * time.Millisecond,
		HandoffDir:     t.TempDir(),
		TerminationLog: filepath.Join(t.TempDir(), "termination-log"),
		Events:         ev,
	}, ev
}

// blockUntil is a gate that waits until ready is closed, then returns result.
func blockUntil(name string, ready <-chan struct{}, result any) spec.Gate {
	return spec.Gate{Name: name, WaitsFor: "the test", Sample: func(ctx context.Context, seen func(bool, string), _ store.Store) (any, error) {
		seen(false, "not yet")
		select {
		case <-ready:
			return result, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
}

// Gates of a phase run at once, and the phase ends when the last is done; each
// result lands in the handoff folder.
func TestPhaseRunsGatesConcurrently(t *testing.T) {
	o, ev := opts(t)
	var running atomic.Int32
	var peak atomic.Int32
	gate := func(name string, d time.Duration) spec.Gate {
		return spec.Gate{Name: name, WaitsFor: "time", Sample: func(ctx context.Context, _ func(bool, string), _ store.Store) (any, error) {
			n := running.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(d) // the scenario: the gate takes d
			running.Add(-1)
			return map[string]string{"gate": name}, nil
		}}
	}
	began := time.Now()
	outcomes, err := gaterun.RunPhase(t.Context(), 0, []spec.Gate{gate("a", 300*time.Millisecond), gate("b", 300*time.Millisecond), gate("c", 300*time.Millisecond)}, o)
	if err != nil {
		t.Fatal(err)
	}
	// Three gates running at one moment is what "at once" means; how long the
	// phase took is the machine's to say, not a pass or fail.
	if peak.Load() != 3 {
		t.Fatalf("peak concurrency %d in %s: want the three gates at once", peak.Load(), time.Since(began))
	}
	for _, out := range outcomes {
		if out.State != "done" {
			t.Errorf("gate %s: %s", out.Gate, out.State)
		}
		h, err := handoff.Read(o.HandoffDir, out.Gate)
		if err != nil {
			t.Fatal(err)
		}
		if h.State != "done" || !strings.Contains(string(h.Result), `"gate":"`+out.Gate+`"`) {
			t.Errorf("handoff of %s: %+v", out.Gate, h)
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(o.HandoffDir, ".gate-*")); len(leftovers) > 0 {
		t.Fatalf("temporary handoff files left: %v", leftovers)
	}
	summary, _ := os.ReadFile(o.TerminationLog)
	if !strings.HasPrefix(string(summary), "phase 0 done") || !strings.Contains(string(summary), "b: done") {
		t.Fatalf("termination summary %q", summary)
	}
	if r := ev.reasons(); !strings.Contains(r, "GateWaiting") || !strings.Contains(r, "GateDone") {
		t.Fatalf("events %s: want waiting and done", r)
	}
}

// A required gate that times out ends the phase as timed out and cancels the
// others; the termination message says what it last saw.
func TestRequiredTimeout(t *testing.T) {
	o, ev := opts(t)
	never := make(chan struct{})
	g := blockUntil("slow", never, nil)
	g.Timeout = 200 * time.Millisecond
	other := blockUntil("other", never, nil)
	_, err := gaterun.RunPhase(t.Context(), 2, []spec.Gate{g, other}, o)
	if !errors.Is(err, spec.ErrTimedOut) {
		t.Fatalf("err = %v, want ErrTimedOut", err)
	}
	if !strings.Contains(err.Error(), "last seen: not yet") {
		t.Fatalf("err = %v, want the last thing seen", err)
	}
	summary, _ := os.ReadFile(o.TerminationLog)
	if !strings.HasPrefix(string(summary), "phase 2 timed out") || !strings.Contains(string(summary), "slow: timed out") {
		t.Fatalf("termination summary %q", summary)
	}
	if !strings.Contains(ev.reasons(), "GateTimedOut") {
		t.Fatalf("events %s: want GateTimedOut", ev.reasons())
	}
}

// An optional gate that times out is skipped; one with a fallback finishes
// with it, and the fallback's result is handed off.
func TestOptionalAndFallback(t *testing.T) {
	o, _ := opts(t)
	never := make(chan struct{})
	optional := blockUntil("optional", never, nil)
	optional.Timeout, optional.Optional = 100*time.Millisecond, true
	withDefaults := blockUntil("defaults", never, nil)
	withDefaults.Timeout = 100 * time.Millisecond
	withDefaults.OnTimeout = func(context.Context, store.Store) (any, error) { return map[string]string{"from": "file"}, nil }
	outcomes, err := gaterun.RunPhase(t.Context(), 1, []spec.Gate{optional, withDefaults}, o)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, out := range outcomes {
		states[out.Gate] = out.State
	}
	if states["optional"] != "skipped" || states["defaults"] != "fallback" {
		t.Fatalf("states %v", states)
	}
	h, err := handoff.Read(o.HandoffDir, "defaults")
	if err != nil || h.State != "fallback" || string(h.Result) != `{"from":"file"}` {
		t.Fatalf("handoff %+v, %v", h, err)
	}
}

// A callback error is retried; a permanent one fails the phase at once.
func TestRetryAndPermanent(t *testing.T) {
	o, _ := opts(t)
	var calls atomic.Int32
	flaky := spec.Gate{Name: "flaky", WaitsFor: "x", Sample: func(context.Context, func(bool, string), store.Store) (any, error) {
		if calls.Add(1) < 3 {
			return nil, errors.New("store not ready")
		}
		return "ok", nil
	}}
	if _, err := gaterun.RunPhase(t.Context(), 0, []spec.Gate{flaky}, o); err != nil || calls.Load() != 3 {
		t.Fatalf("err %v after %d calls, want success on the third", err, calls.Load())
	}
	never := make(chan struct{})
	broken := spec.Gate{Name: "broken", WaitsFor: "x", Sample: func(context.Context, func(bool, string), store.Store) (any, error) {
		return nil, gate.Permanent(errors.New("exemptions are malformed"))
	}}
	began := time.Now()
	_, err := gaterun.RunPhase(t.Context(), 0, []spec.Gate{broken, blockUntil("waiting", never, nil)}, o)
	if !gate.IsPermanent(err) || !strings.Contains(err.Error(), "gate broken: exemptions are malformed") {
		t.Fatalf("err = %v, want the permanent error named by gate", err)
	}
	if time.Since(began) > 2*time.Second {
		t.Fatal("a permanent error did not end the phase at once")
	}
	summary, _ := os.ReadFile(o.TerminationLog)
	if !strings.Contains(string(summary), "exemptions are malformed") {
		t.Fatalf("termination summary %q lacks the message", summary)
	}
}

// Rerunning a phase overwrites its handoff; the summary never exceeds what the
// kubelet keeps.
func TestRerunAndSummaryLimit(t *testing.T) {
	o, _ := opts(t)
	ready := make(chan struct{})
	close(ready)
	for _, v := range []string{"first", "second"} {
		if _, err := gaterun.RunPhase(t.Context(), 0, []spec.Gate{blockUntil("g", ready, v)}, o); err != nil {
			t.Fatal(err)
		}
	}
	h, err := handoff.Read(o.HandoffDir, "g")
	if err != nil || string(h.Result) != `"second"` {
		t.Fatalf("handoff after rerun %+v, %v", h, err)
	}
	var many []spec.Gate
	for i := range 200 {
		g := blockUntil(strings.Repeat("x", 30)+string(rune('a'+i%26))+strings.Repeat("y", i%7), ready, nil)
		g.Name += "-" + string(rune('a'+i/26))
		many = append(many, g)
	}
	if _, err := gaterun.RunPhase(t.Context(), 0, many, o); err != nil {
		t.Fatal(err)
	}
	summary, _ := os.ReadFile(o.TerminationLog)
	if len(summary) > gaterun.MaxTermination || len(summary) < 1000 {
		t.Fatalf("summary of %d bytes, want at most %d", len(summary), gaterun.MaxTermination)
	}
}

// A waiting gate logs "gate waiting" every interval with what it waits for,
// for how long and what it last saw ("nothing yet" before it saw anything):
// the line vigil dev parses.
func TestWaitingGateLogsWhatItLastSaw(t *testing.T) {
	o, _ := opts(t)
	var mu sync.Mutex
	var lines []string
	o.Log = funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	logged := func(want string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range lines {
			if strings.Contains(l, want) {
				return true
			}
		}
		return false
	}
	waitLogged := func(want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !logged(want) {
			if time.Now().After(deadline) {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("no log line contains %s within 5s; got:\n%s", want, strings.Join(lines, "\n"))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	saw, release := make(chan func(bool, string), 1), make(chan struct{})
	g := spec.Gate{Name: "cfg", WaitsFor: "ConfigMap settings: created", Sample: func(ctx context.Context, seen func(bool, string), _ store.Store) (any, error) {
		saw <- seen
		select {
		case <-release:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	done := make(chan error, 1)
	go func() {
		_, err := gaterun.RunPhase(t.Context(), 0, []spec.Gate{g}, o)
		done <- err
	}()
	seen := <-saw
	waitLogged(`"msg"="gate waiting" "phase"=0 "gate"="cfg" "event"="gate-waiting" "waitsFor"="ConfigMap settings: created" "for"="0s" "lastSeen"="nothing yet"`)
	seen(false, "not found")
	waitLogged(`"waitsFor"="ConfigMap settings: created" "for"="0s" "lastSeen"="not found"`)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A phase whose context is canceled while its gate waits returns ErrCanceled
// naming the gate, records it in the termination log and an Event, and hands
// nothing off.
func TestCanceledPhaseFails(t *testing.T) {
	o, ev := opts(t)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := gaterun.RunPhase(ctx, 0, []spec.Gate{blockUntil("slow", nil, "x")}, o)
	if !errors.Is(err, gaterun.ErrCanceled) || !strings.Contains(err.Error(), "slow") {
		t.Fatalf("RunPhase = %v, want ErrCanceled naming gate slow", err)
	}
	summary, rerr := os.ReadFile(o.TerminationLog)
	if rerr != nil || !strings.HasPrefix(string(summary), "phase 0 canceled") || !strings.Contains(string(summary), "slow: canceled") {
		t.Fatalf("termination log %q (%v): want the phase canceled and gate slow", summary, rerr)
	}
	if !strings.Contains(ev.reasons(), "GateCanceled") {
		t.Fatalf("events %s: want GateCanceled", ev.reasons())
	}
	if files, _ := os.ReadDir(o.HandoffDir); len(files) != 0 {
		t.Fatalf("handoff folder holds %d files, want none", len(files))
	}
}

// While a gate's callback runs, what it waited for was seen: the progress
// line says the callback runs, and for how long, not "gate waiting"; once the
// callback fails, the gate waits again.
func TestRunningCallbackIsReported(t *testing.T) {
	o, _ := opts(t)
	var mu sync.Mutex
	var lines []string
	o.Log = funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	count := func(want string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, l := range lines {
			if strings.Contains(l, want) {
				n++
			}
		}
		return n
	}
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for count(want) == 0 {
			if time.Now().After(deadline) {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("no log line contains %s within 5s; got:\n%s", want, strings.Join(lines, "\n"))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	calling, release := make(chan struct{}), make(chan struct{})
	calls := 0
	g := spec.Gate{Name: "cfg", WaitsFor: "ConfigMap settings: created", Sample: func(ctx context.Context, seen func(bool, string), _ store.Store) (any, error) {
		calls++
		seen(true, "1 of 1 match")
		if calls == 1 {
			defer progress.CallbackRunning(ctx)()
			close(calling)
			<-release
			return nil, errors.New("store write failed")
		}
		return "ok", nil
	}}
	done := make(chan error, 1)
	go func() {
		_, err := gaterun.RunPhase(t.Context(), 0, []spec.Gate{g}, o)
		done <- err
	}()
	<-calling
	waitFor(`"msg"="gate callback running" "phase"=0 "gate"="cfg" "event"="gate-callback-running" "waitsFor"="ConfigMap settings: created"`)
	waitFor(`"callbackFor"=`)
	before := count(`"msg"="gate waiting"`)
	time.Sleep(200 * time.Millisecond) // four progress intervals while the callback runs
	if after := count(`"msg"="gate waiting"`); after != before {
		t.Fatalf("%d gate waiting lines while the callback ran", after-before)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
