package vigil

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/vigilkit/vigil/internal/cli"
	"github.com/vigilkit/vigil/internal/watcher"
	"github.com/vigilkit/vigil/store"
)

// Watcher runs the watcher role: the module's Watch, Reconcile and Finalize
// bindings and its schedules, on the replica that holds the lease.
func (a moduleApp) Watcher(ctx context.Context, cfg *rest.Config, log logr.Logger, o cli.WatcherOptions) error {
	m := a.m
	m.mu.Lock()
	bindings := append([]watcher.Binding(nil), m.watches...)
	schedules := append([]watcher.Schedule(nil), m.schedules...)
	m.mu.Unlock()
	st := newLazyStore(ctx, cfg, store.Options{Namespace: m.namespace, Name: m.name, Logger: log})
	return watcher.Run(ctx, cfg, watcher.Options{
		Module:           m.name,
		Namespace:        m.namespace,
		Scheme:           m.scheme,
		Bindings:         bindings,
		Schedules:        schedules,
		Listers:          m.listerUsers(),
		LeaderElection:   o.LeaderElection,
		LeaseDuration:    o.LeaseDuration,
		RenewDeadline:    o.RenewDeadline,
		RetryPeriod:      o.RetryPeriod,
		MetricsAddr:      o.MetricsAddr,
		ReconcileSpacing: o.ReconcileSpacing,
		ProbeAddr:        o.ProbeAddr,
		Context: func(ctx context.Context, capability string) context.Context {
			var s Store = st
			if capability != "" {
				s = st.Scope(capability)
			}
			return context.WithValue(ctx, storeKey{}, s)
		},
		Cache: func(c cache.Cache) { m.useCache(c) },
		Log:   log,
	})
}
