package watcher

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/events"
	"github.com/vigilkit/vigil/internal/runtime/informers"
	"github.com/vigilkit/vigil/internal/runtime/podevents"
	"github.com/vigilkit/vigil/internal/runtime/rolebind"
	"github.com/vigilkit/vigil/internal/runtime/watchhealth"
)

// Options are the options of `<module> watcher`, filled from its flags.
type Options struct {
	// LeaderElection makes one replica active at a time; off, every replica
	// is.
	LeaderElection bool
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election:
	// 15s, 10s and 2s when zero. A replica takes over within LeaseDuration of
	// the active one's death, and at once after its graceful stop.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// ReconcileSpacing is the least time between the starts of two
	// reconciles of one object: DefaultSpacing when zero.
	ReconcileSpacing time.Duration
	// AuditInterval is how often the audit runs on the active replica, once
	// the webhooks enforce: DefaultAuditInterval when zero.
	AuditInterval time.Duration
	// MetricsAddr serves /metrics; ProbeAddr serves /healthz and /readyz.
	// Empty disables either.
	MetricsAddr, ProbeAddr string
	// Pprof serves Go's profiles under /debug/pprof/ on MetricsAddr.
	Pprof bool
	// OutageCheckInterval is how often the watch for outages of the
	// admission replicas checks: 2s when zero.
	OutageCheckInterval time.Duration
	// StaleAfter is how long an informer may hear nothing from the API
	// server before it is stale, watched again, and named by /readyz
	// (internal/runtime/watchhealth): watchhealth.DefaultStaleAfter, or
	// VIGIL_WATCH_STALE_AFTER, when zero.
	StaleAfter time.Duration
}

// runOptions are what the manager runs: the Options, and what Run derives
// from the module.
type runOptions struct {
	Options
	// Module names the leader-election Lease (<module>-watcher) and the
	// metrics.
	Module string
	// Namespace holds the Lease.
	Namespace string
	Scheme    *runtime.Scheme
	Bindings  []spec.Watch
	Schedules []spec.Schedule
	// Listers are the types the module's listers read.
	Listers []spec.Lister
	// Context gives a handler of the capability its context (the Store).
	Context func(ctx context.Context, capability string) context.Context
	// Cache is told the shared cache once it is made, for listers.
	Cache func(cache.Cache)
	// Audit, when set, runs on the active replica once the webhooks enforce
	// and then every AuditInterval.
	Audit Auditor
	// Outages, when set, runs on the active replica only: the watch for
	// outages of the admission replicas (registration.WatchOutages).
	Outages func(ctx context.Context) error
	// Health follows the informers: /readyz names a stale one, /healthz
	// fails when a restart would help.
	Health *watchhealth.Tracker
	// Binder binds the role's rights in the namespaces of its informers.
	Binder *rolebind.Binder
	// global is the queue every QueueGlobal Ordered binding shares.
	global *queues
	Log    logr.Logger
}

// run runs the watcher until ctx ends, or until the replica loses its lease
// (an error: the process must restart, as it may no longer act).
func run(ctx context.Context, cfg *rest.Config, o runOptions) error {
	if o.Context == nil {
		o.Context = func(ctx context.Context, _ string) context.Context { return ctx }
	}
	o.global = newQueues()
	users := append([]spec.Lister(nil), o.Listers...)
	for _, b := range o.Bindings {
		users = append(users, spec.Lister{GVK: b.GVK, New: b.New, Select: b.Select})
	}
	agreed := spec.Agree(users)
	byObject, err := informers.ByObject(agreed)
	if err != nil {
		return err
	}
	// The role's probes, for its whole life: live unless a restart would
	// help; ready once the informers have synced and while none is stale.
	var readiness atomic.Pointer[func() error]
	setReady := func(f func() error) { readiness.Store(&f) }
	setReady(func() error { return errors.New("starting") })
	if o.ProbeAddr != "" {
		stop, err := serveProbes(o.ProbeAddr, func() error { return (*readiness.Load())() }, o.Health.Live)
		if err != nil {
			return err
		}
		defer stop()
	}
	if err := awaitServedProbed(ctx, cfg, agreed, o, setReady); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting: nothing had started
		}
		return err
	}
	metrics := registerMetrics()
	mopts := managerOptions(ctx, o, byObject, metrics)
	mgr, err := manager.New(cfg, mopts)
	if err != nil {
		return fmt.Errorf("watcher: %w", err)
	}
	if o.Cache != nil {
		o.Cache(mgr.GetCache())
	}
	var ready atomic.Bool
	setReady(func() error {
		if !ready.Load() {
			return errors.New("the informers have not synced yet")
		}
		return o.Health.Check()
	})
	for i := range o.Schedules {
		if err := mgr.Add(&scheduleRunner{s: o.Schedules[i], module: o.Module, log: o.Log, ctx: o.Context, metrics: metrics}); err != nil {
			return err
		}
	}
	if o.Outages != nil {
		if err := mgr.Add(manager.RunnableFunc(o.Outages)); err != nil { // leader-elected
			return err
		}
	}
	// Bindings start once their types' informers have synced: a type whose
	// CRD is not installed yet is waited for, not an error.
	start := manager.RunnableFunc(func(ctx context.Context) error {
		if err := informers.WarmUp(ctx, mgr.GetCache(), agreed, o.Log); err != nil {
			return err
		}
		for i := range o.Bindings {
			b := &o.Bindings[i]
			if err := addBinding(mgr, b, o, metrics); err != nil {
				return fmt.Errorf("binding %s (%s): %w", b.ID(), b.Site, err)
			}
		}
		if o.Audit != nil {
			if err := mgr.Add(&auditRunner{a: o.Audit, interval: o.AuditInterval, log: o.Log}); err != nil {
				return err
			}
		}
		ready.Store(true)
		events.Info(o.Log, events.WatcherReady, "watcher ready", "types", len(agreed), "bindings", len(o.Bindings), "schedules", len(o.Schedules))
		<-ctx.Done()
		return nil
	})
	if err := mgr.Add(nonLeader{start}); err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	if o.LeaderElection {
		select {
		case <-mgr.Elected():
			// Start returns once the leader elector has stopped: the Lease is
			// released (LeaderElectionReleaseOnCancel).
			o.Log.Info("leader lease released: the replica stops", "lease", o.Namespace+"/"+spec.WatcherLeaseName(o.Module))
		default:
		}
	}
	return nil
}

// awaitServedProbed waits until the API server serves the kinds a CRD
// serves among agreed (see Served), the watcher's readiness meanwhile saying
// what it waits for.
func awaitServedProbed(ctx context.Context, cfg *rest.Config, agreed []spec.Agreed, o runOptions, setReady func(func() error)) error {
	kinds := informers.CustomKinds(agreed)
	if len(kinds) == 0 {
		return nil
	}
	served := informers.NewServed(kinds)
	setReady(served.Err)
	return served.Await(ctx, cfg, o.Log, podevents.ForRole(cfg, o.Module, "watcher"))
}

// managerOptions are the manager's options: the shared cache, leader
// election on the module's Lease, metrics and probes.
func managerOptions(ctx context.Context, o runOptions, byObject map[client.Object]cache.ByObject, metrics *metrics) manager.Options {
	mopts := manager.Options{
		Scheme: o.Scheme,
		Logger: releaseIsNoError(ctx, o.Log),
		Cache: cache.Options{
			ByObject:                 byObject,
			DefaultTransform:         informers.Transform(),
			DefaultWatchErrorHandler: informers.WatchErrorHandler(o.Module),
			NewInformer:              informers.NewInformer(o.Module, o.Health, o.Scheme, o.Binder),
		},
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              spec.WatcherLeaseName(o.Module),
		LeaderElectionNamespace:       o.Namespace,
		LeaderElectionReleaseOnCancel: true,
		Metrics:                       metricsOptions(o),
		// The role serves its own probes (serveProbes), which say why.
		HealthProbeBindAddress:  "",
		Controller:              config.Controller{SkipNameValidation: ptr.To(true), RecoverPanic: ptr.To(true)},
		GracefulShutdownTimeout: ptr.To(30 * time.Second),
	}
	if o.LeaseDuration > 0 {
		mopts.LeaseDuration = &o.LeaseDuration
	}
	if o.RenewDeadline > 0 {
		mopts.RenewDeadline = &o.RenewDeadline
	}
	if o.RetryPeriod > 0 {
		mopts.RetryPeriod = &o.RetryPeriod
	}
	return mopts
}

// metricsOptions serve /metrics on MetricsAddr and, with Pprof, Go's
// profiles beside it.
func metricsOptions(o runOptions) metricsserver.Options {
	m := metricsserver.Options{BindAddress: orDisabled(o.MetricsAddr)}
	if o.Pprof {
		m.ExtraHandlers = map[string]http.Handler{
			"/debug/pprof/":        http.HandlerFunc(pprof.Index),
			"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
			"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
			"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
		}
	}
	return m
}

// nonLeader runs on every replica, leader or not.
type nonLeader struct{ manager.Runnable }

func (nonLeader) NeedLeaderElection() bool { return false }

func orDisabled(addr string) string {
	if addr == "" {
		return "0"
	}
	return addr
}

// handlerContext is the context a handler of b runs with.
func handlerContext(ctx context.Context, o runOptions, b *spec.Watch, obj client.Object) context.Context {
	log := o.Log.WithValues("binding", b.ID(), "kind", b.GVK.Kind, "namespace", obj.GetNamespace(), "name", obj.GetName())
	return logr.NewContext(o.Context(ctx, b.Capability), log)
}

// errLeaderElectionLost is what controller-runtime's manager reports when its
// leader elector stops leading: on a lost Lease, and on the release of a
// graceful stop (LeaderElectionReleaseOnCancel) too.
const errLeaderElectionLost = "leader election lost"

// releaseIsNoError is log for the manager, but without the "leader election
// lost" it logs as an error once ctx has ended: there the Lease is released
// by a planned stop, which Run reports. controller-runtime gives no other hook: its
// OnStoppedLeading sends that error whether the Lease was lost or released.
func releaseIsNoError(ctx context.Context, log logr.Logger) logr.Logger {
	if log.GetSink() == nil {
		return log
	}
	return logr.New(plannedRelease{LogSink: log.GetSink(), stopping: func() bool { return ctx.Err() != nil }})
}

type plannedRelease struct {
	logr.LogSink
	stopping func() bool
}

func (s plannedRelease) Error(err error, msg string, kv ...any) {
	if err != nil && err.Error() == errLeaderElectionLost && s.stopping() {
		// Run says the Lease was released once it was.
		if s.LogSink.Enabled(1) {
			s.LogSink.Info(1, "leader elector stopped", "reason", "the replica stops")
		}
		return
	}
	s.LogSink.Error(err, msg, kv...)
}

// Init leaves the wrapped sink as it is: it was initialized when its logger
// was made, and it is shared with the role's other loggers, which may log
// meanwhile (logr.New calls Init, and a slog sink's Init writes to it).
func (s plannedRelease) Init(logr.RuntimeInfo) {}

func (s plannedRelease) WithValues(kv ...any) logr.LogSink {
	return plannedRelease{LogSink: s.LogSink.WithValues(kv...), stopping: s.stopping}
}

func (s plannedRelease) WithName(name string) logr.LogSink {
	return plannedRelease{LogSink: s.LogSink.WithName(name), stopping: s.stopping}
}
