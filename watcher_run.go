package vigil

import (
	"context"
	"fmt"
	"strings"

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
	st := store.NewLazy(ctx, cfg, store.Options{Namespace: m.namespace, Name: m.name, Logger: log})
	rc := &roleClients{cfg: cfg, scheme: m.scheme}
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
			return withModuleStore(withClients(context.WithValue(ctx, storeKey{}, s), rc), st)
		},
		Cache: func(c cache.Cache) { m.useCache(c) },
		Log:   log,
	})
}

// Watching is what `plan` shows of the watcher role.
func (a moduleApp) Watching() cli.PlanWatcher {
	m := a.m
	users := m.listerUsers()
	m.mu.Lock()
	defer m.mu.Unlock()
	var w cli.PlanWatcher
	for _, b := range m.watches {
		line := fmt.Sprintf("%s %s %s", b.ID(), b.Role, b.GVK.Kind)
		if b.Role == watcher.Finalize {
			line += " (finalizer " + b.Finalizer + ")"
		}
		w.Bindings = append(w.Bindings, line+" ("+b.Site+")")
		users = append(users, watcher.User{GVK: b.GVK, New: b.New, Select: b.Select})
	}
	for _, s := range m.schedules {
		w.Schedules = append(w.Schedules, fmt.Sprintf("%s (%s)", s.Name, s.Site))
	}
	for _, ag := range watcher.Agree(users) {
		var sel []string
		if len(ag.Namespaces) > 0 {
			sel = append(sel, "namespaces "+strings.Join(ag.Namespaces, ","))
		}
		if ag.Labels != "" {
			sel = append(sel, "labels "+ag.Labels)
		}
		if ag.Name != "" {
			sel = append(sel, "name "+ag.Name)
		}
		if len(sel) == 0 {
			sel = append(sel, "everything, cluster-wide")
		}
		w.Informers = append(w.Informers, fmt.Sprintf("%s: %s", ag.GVK.Kind, strings.Join(sel, "; ")))
	}
	return w
}
