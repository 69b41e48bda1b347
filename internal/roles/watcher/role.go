package watcher

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/callctx"
	"github.com/vigilkit/vigil/internal/runtime/rolebind"
	"github.com/vigilkit/vigil/internal/runtime/watchhealth"
	"github.com/vigilkit/vigil/internal/serving/audit"
	"github.com/vigilkit/vigil/internal/serving/gcpace"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/store"
)

// Run runs a module's watcher role, `<module> watcher`: its Watch, Reconcile
// and Finalize bindings and its schedules, on the replica that holds the
// lease, until ctx ends or the replica loses the lease (an error). opts gives
// the leader election, spacing and addresses; the rest comes from the module.
// Handlers get the Store lazily: a module whose handlers never use it needs
// neither its CRD nor its RBAC. It logs to logr.FromContext(ctx).
func Run(ctx context.Context, cfg *rest.Config, m *spec.Module, opts Options) error {
	o := runOptions{Options: opts, Log: logr.FromContextOrDiscard(ctx).WithValues("module", m.Name)}
	// A heap that is mostly the informers' caches: collected as Go would
	// while small, sooner once large, so that a relist does not double it
	// (see internal/serving/gcpace; GOGC in the environment turns this off).
	gcpace.StartHolding()
	health, err := watchhealth.New(m.Name, "watcher", watchhealth.Options{StaleAfter: opts.StaleAfter, Log: o.Log})
	if err != nil {
		return err
	}
	defer health.Close()
	// Every client of the role goes through the tracker's connections.
	cfg = health.Instrument(cfg)
	o.Health = health
	// The role's rights in a team's namespace are bound there once it
	// exists; its informers and clients wait for that instead of failing.
	if o.Binder, err = rolebind.NewBinder(cfg, m.Name, spec.PodWatcher, m.Namespace, o.Log); err != nil {
		return err
	}
	cfg = o.Binder.Instrument(cfg)
	st := store.NewLazy(ctx, cfg, store.Options{Namespace: m.Namespace, Name: m.Name, Logger: o.Log})
	calls := &callctx.Role{Config: cfg, Scheme: m.Scheme, Module: st, Scope: func(capability string) store.Store { return st.Scope(capability) }}
	go callctx.StoreReady(callctx.With(ctx, calls, st), st, m.StoreReady, o.Log)
	o.Module, o.Namespace, o.Scheme = m.Name, m.Namespace, m.Scheme
	o.Bindings, o.Schedules, o.Listers = m.Watches, m.Schedules, m.Listers
	o.Context = func(ctx context.Context, capability string) context.Context {
		return callctx.With(ctx, calls, calls.ScopeOf(capability))
	}
	// The module's listers read the cache from their handlers' context.
	o.Cache = func(c cache.Cache) { calls.SetCache(c, nil) }
	if m.Audited() {
		// The audit judges existing objects with the module's validations,
		// as the admission role would, their Store refusing writes.
		scope := func(capability string) store.Store { return st.Scope(capability) }
		o.Audit = audit.New(m, cfg, o.Log, scope, func(ctx context.Context, s store.Store) context.Context {
			return callctx.With(ctx, calls, s)
		})
	}
	if m.FailsOpen() {
		if o.Outages, err = registration.Outages(cfg, m, o.Log, o.OutageCheckInterval); err != nil {
			return err
		}
	}
	return run(ctx, cfg, o)
}
