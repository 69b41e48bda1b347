package gaterun_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/roles/gaterun"
	"github.com/vigilkit/vigil/internal/runtime/callctx"
	"github.com/vigilkit/vigil/internal/runtime/handoff"
	"github.com/vigilkit/vigil/store"
)

// Run runs the module's phase it is given, and only that one: each gate's
// callback gets the role's values and the Store it is handed, its result
// lands in the handoff folder, and the phase's summary in the termination
// log. A module's gates that never use the Store need no API server.
func TestRunRunsOnePhaseOfTheModule(t *testing.T) {
	t.Setenv("POD_NAME", "") // no Events: not in a pod
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	var mu sync.Mutex
	ran := map[string]bool{}
	sample := func(name string) spec.Gate {
		return spec.Gate{Name: name, WaitsFor: "the test", Sample: func(ctx context.Context, _ func(bool, string), s store.Store) (any, error) {
			mu.Lock()
			ran[name] = true
			mu.Unlock()
			if r := callctx.RoleOf(ctx); r == nil || r.Config != cfg {
				return nil, errors.New("the callback's context lacks the role's config")
			}
			if s == nil || callctx.Store(ctx) != s {
				return nil, errors.New("the callback's context lacks the Store it is handed")
			}
			return name + " done", nil
		}}
	}
	m := &spec.Module{Name: "demo", Namespace: "demo", Phases: []spec.Phase{
		{Phase: 0, Gates: []spec.Gate{sample("first")}},
		{Phase: 1, Gates: []spec.Gate{sample("second"), sample("third")}},
	}}
	dir := t.TempDir()
	termination := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(termination, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := gaterun.Run(t.Context(), cfg, m, gaterun.Options{Phase: 1, HandoffDir: dir, TerminationLog: termination}); err != nil {
		t.Fatal(err)
	}
	if ran["first"] || !ran["second"] || !ran["third"] {
		t.Errorf("ran %v, want the gates of phase 1 only", ran)
	}
	for _, name := range []string{"second", "third"} {
		got, found, err := handoff.Result[string](dir, name)
		if err != nil || !found || got != name+" done" {
			t.Errorf("handoff of %s: %q, %v, %v", name, got, found, err)
		}
	}
	if _, err := os.Stat(handoff.Path(dir, "first")); err == nil {
		t.Error("the gate of phase 0 handed a result off")
	}
	summary, err := os.ReadFile(termination)
	if err != nil || !strings.Contains(string(summary), "phase 1") {
		t.Errorf("termination log %q, %v: want the summary of phase 1", summary, err)
	}
}

// A phase the module does not have passes at once; a negative one is a
// mistake.
func TestRunChecksThePhase(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	m := &spec.Module{Name: "demo", Namespace: "demo"}
	if err := gaterun.Run(t.Context(), cfg, m, gaterun.Options{Phase: 3}); err != nil {
		t.Errorf("a phase with no gates: %v", err)
	}
	if err := gaterun.Run(t.Context(), cfg, m, gaterun.Options{Phase: -1}); err == nil {
		t.Error("phase -1: no error")
	}
}
