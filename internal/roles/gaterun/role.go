package gaterun

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/callctx"
	"github.com/vigilkit/vigil/internal/runtime/podevents"
	"github.com/vigilkit/vigil/internal/runtime/rolebind"
	"github.com/vigilkit/vigil/internal/runtime/waitfor"
	"github.com/vigilkit/vigil/internal/runtime/watchhealth"
	"github.com/vigilkit/vigil/store"
)

// Options are the options of `<module> gate`, filled from its flags.
type Options struct {
	// Phase is the phase to run, 0 or more.
	Phase int
	// HandoffDir receives one JSON file per gate; none is written when empty.
	HandoffDir string
	// TerminationLog receives the phase's summary; none when empty.
	TerminationLog string
	// Interval between progress lines of a waiting gate; 5s when zero.
	Interval time.Duration
	// StaleAfter is how long a gate's watch may hear nothing from the API
	// server before it is ended and watched again (internal/runtime/watchhealth):
	// watchhealth.DefaultStaleAfter, or VIGIL_WATCH_STALE_AFTER, when zero.
	StaleAfter time.Duration
}

// Run runs one phase of the module's gates, `<module> gate --phase N`, as
// its init container gate-phase-N does, and returns when every required
// gate is done. The error wraps spec.ErrTimedOut when a gate timed out and
// ErrCanceled when ctx ended first. It logs to logr.FromContext(ctx).
func Run(ctx context.Context, cfg *rest.Config, m *spec.Module, o Options) error {
	if o.Phase < 0 {
		return fmt.Errorf("phase %d: expected the phase to run, 0 or more", o.Phase)
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("module", m.Name)
	health, err := watchhealth.New(m.Name, "gate", watchhealth.Options{StaleAfter: o.StaleAfter, Log: log})
	if err != nil {
		return err
	}
	defer health.Close()
	// A gate's watch that falls silent is ended and watched again, over new
	// connections: an init container has no probe to restart it. The
	// callbacks reach the API server as the role does, with cfg.
	watchCfg := health.Instrument(cfg)
	// The gates' rights in a team's namespace are bound there once it
	// exists; a gate on an object there waits for the namespace too.
	binder, err := rolebind.NewBinder(cfg, m.Name, spec.PodAdmission, m.Namespace, log)
	if err != nil {
		return err
	}
	watchCfg = binder.Instrument(watchCfg)
	var gates []spec.Gate
	if p := m.Phase(o.Phase); p != nil {
		gates = p.Gates
	}
	opts := PhaseOptions{Log: log, Interval: o.Interval, HandoffDir: o.HandoffDir, TerminationLog: o.TerminationLog}
	if sink := podevents.For(cfg, m.Name, o.Phase); sink != nil {
		opts.Events = sink
	}
	for _, g := range gates {
		if g.Sample == nil {
			var err error
			if opts.Waiter, err = waitfor.New(watchCfg, log); err != nil {
				return err
			}
			opts.Waiter.Track(health)
			opts.Waiter.Bind(binder)
			break
		}
	}
	// Gate callbacks get the Store lazily: a module whose gates never use it
	// needs neither its CRD nor its RBAC to pass them.
	st := store.NewLazy(ctx, cfg, store.Options{Namespace: m.Namespace, Name: m.Name, Logger: log})
	calls := &callctx.Role{Config: cfg, Scheme: m.Scheme, Module: st, Scope: func(capability string) store.Store { return st.Scope(capability) }}
	opts.Store = st
	opts.Context = func(ctx context.Context) context.Context { return callctx.With(ctx, calls, st) }
	_, err = RunPhase(ctx, o.Phase, gates, opts)
	return err
}
