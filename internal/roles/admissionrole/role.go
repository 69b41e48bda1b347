package admissionrole

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/callctx"
	"github.com/vigilkit/vigil/internal/runtime/events"
	"github.com/vigilkit/vigil/internal/runtime/handoff"
	"github.com/vigilkit/vigil/internal/runtime/informers"
	"github.com/vigilkit/vigil/internal/runtime/podevents"
	"github.com/vigilkit/vigil/internal/runtime/rolebind"
	"github.com/vigilkit/vigil/internal/runtime/served"
	"github.com/vigilkit/vigil/internal/runtime/watchhealth"
	"github.com/vigilkit/vigil/internal/serving/admit"
	"github.com/vigilkit/vigil/internal/serving/certs"
	"github.com/vigilkit/vigil/internal/serving/gcpace"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/internal/serving/webhook"
	"github.com/vigilkit/vigil/store"
)

// Options are the options of `<module> admission`.
type Options struct {
	Addr       string
	CertDir    string
	CertSecret string
	CertHosts  []string
	Register   bool
	WebhookURL string
	CAFile     string
	// Bootstrap creates the empty webhook configurations when missing.
	Bootstrap bool
	// CheckInterval is how often a replica keeps its configurations true
	// (repairs drift, reports a deleted one); CheckInterval (2s) when zero.
	CheckInterval time.Duration
	// LeaseDuration of this version's admission Lease, which tells an older
	// version whether this one still runs (spec.LeaseName);
	// registration.DefaultLeaseDuration when zero.
	LeaseDuration time.Duration
	HandoffDir    string
	// ShutdownDelay is how long to keep serving, not ready, after ctx ends;
	// zero stops at once.
	ShutdownDelay time.Duration
	// NotReadyLogInterval is how often a replica that is not ready logs why;
	// NotReadyLogInterval (10s) when zero.
	NotReadyLogInterval time.Duration
	// Listening, when set, is told the address the server listens on.
	Listening func(addr string)
	// MetricsAddr serves /metrics over plain HTTP; none when empty.
	MetricsAddr string
	// Pprof serves Go's profiles under /debug/pprof/ on MetricsAddr.
	Pprof bool
	// MetricsListening, when set, is told the metrics address.
	MetricsListening func(addr string)
	// StaleAfter is how long a lister's informer may hear nothing from the
	// API server before it is stale, watched again, and named by /readyz
	// (internal/runtime/watchhealth): watchhealth.DefaultStaleAfter, or
	// VIGIL_WATCH_STALE_AFTER, when zero.
	StaleAfter time.Duration
}

// processStart is about when the process started: package variables are
// set before main runs.
var processStart = time.Now()

// Run runs a module's admission role, `<module> admission`: it serves the
// module's mutations and validations over HTTPS until ctx ends, and, with
// o.Register, fills the module's webhook configurations once ready. It logs
// to logr.FromContext(ctx).
func Run(ctx context.Context, cfg *rest.Config, m *spec.Module, o Options) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("module", m.Name)
	marks := &startup{init: time.Since(processStart)}
	// A small live heap, and reviews that allocate a few times their size:
	// collect less often than Go's default while the heap is small (see
	// internal/serving/gcpace; GOGC in the environment turns this off).
	gcpace.Start()
	health, err := watchhealth.New(m.Name, "admission", watchhealth.Options{StaleAfter: o.StaleAfter, Log: log})
	if err != nil {
		return err
	}
	defer health.Close()
	// Every client of the role goes through the tracker's connections.
	cfg = health.Instrument(cfg)
	// The role's rights in a team's namespace are bound there once it
	// exists; its clients wait for that instead of failing.
	binder, err := rolebind.NewBinder(cfg, m.Name, spec.PodAdmission, m.Namespace, log)
	if err != nil {
		return err
	}
	cfg = binder.Instrument(cfg)
	// What the cluster serves decides the version of each kind the role
	// writes; a declared feature it cannot serve stops the role here,
	// before anything is registered half-enforced.
	cluster, err := served.DiscoverConfig(ctx, cfg)
	if err != nil {
		return err
	}
	if err := registration.Unservable(m, cluster); err != nil {
		return fmt.Errorf("the cluster cannot serve what module %s declares, so its admission role does not start:\n%w", m.Name, err)
	}
	// GateResult, in the module's handlers, reads this folder while the
	// role runs.
	defer callctx.SetHandoffDir(m.Name, o.HandoffDir)()
	r, err := start(ctx, cfg, m, o.HandoffDir, log, marks, health, binder)
	if err != nil {
		return err
	}
	go logNotReady(ctx, log, r.ready, o.NotReadyLogInterval)
	serve := serveOptions(m, o, r, log)
	caBundle := func() []byte {
		path := o.CAFile
		if path == "" {
			path = filepath.Join(o.CertDir, "ca.crt")
		}
		data, _ := os.ReadFile(path)
		return data
	}
	if o.CertSecret != "" {
		mgr, err := manageCertificate(ctx, cfg, m, o, log)
		if err != nil {
			return err
		}
		serve.GetCertificate = mgr.GetCertificate
		caBundle = mgr.CABundle
	}
	listening := make(chan struct{})
	serve.Listening = func(addr string) {
		marks.listening = time.Since(processStart)
		close(listening)
		go marks.logWhenReady(ctx, log, r.ready)
		if o.Listening != nil {
			o.Listening(addr)
		}
	}
	if o.Bootstrap {
		if err := bootstrapConfigurations(ctx, cfg, cluster, m); err != nil {
			return err
		}
	}
	if o.Register {
		if err := register(ctx, cfg, m, o, log, r, &serve, caBundle, listening); err != nil {
			return err
		}
	}
	return webhook.Serve(ctx, serve)
}

// serveOptions are the server's: the role's handler, readiness and metrics,
// with the limits that refuse at once what exceeds them.
func serveOptions(m *spec.Module, o Options, r *role, log logr.Logger) webhook.Options {
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "vigil", Subsystem: "admission", Name: "refused_total",
		Help:        "Requests and connections the server's limits refused at once, so that the API server applied the failure policy: in_flight, reading, body_budget, too_large, body_timeout, bad_body; connections, per_source (closed at accept), evicted_idle (an idle one closed for a new one), evicted_reading (one still reading a request closed for a source below its fair share), silent (no request in time); metrics_<reason> for the metrics port's connections.",
		ConstLabels: prometheus.Labels{"module": m.Name},
	}, []string{"reason"})
	accepted := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "vigil", Subsystem: "admission", Name: "connections_total",
		Help:        "Connections the webhook server accepted, each a TLS handshake. Against the reviews served, it says whether the API server keeps its connections alive: a handshake costs more CPU than a review.",
		ConstLabels: prometheus.Labels{"module": m.Name},
	})
	r.registry.MustRegister(refused, accepted)
	serve := webhook.Options{
		Addr:          o.Addr,
		CertFile:      filepath.Join(o.CertDir, "tls.crt"),
		KeyFile:       filepath.Join(o.CertDir, "tls.key"),
		Handler:       r.handler,
		Metrics:       promhttp.HandlerFor(r.registry, promhttp.HandlerOpts{Registry: r.registry}),
		Ready:         r.ready,
		Live:          r.health.Live,
		ShutdownDelay: o.ShutdownDelay,
		Lingering:     r.handler.Lingering,
		Log:           log,
	}
	serve.MetricsAddr, serve.MetricsListening, serve.Pprof = o.MetricsAddr, o.MetricsListening, o.Pprof
	serve.Limits = webhook.Limits{
		MaxBodyBytes: admit.DefaultMaxBodyBytes,
		Refused:      func(reason string) { refused.WithLabelValues(reason).Inc() },
		Accepted:     accepted.Inc,
	}
	serve.MetricsLimits = webhook.Limits{Refused: func(reason string) { refused.WithLabelValues("metrics_" + reason).Inc() }}
	return serve
}

// manageCertificate keeps the CA and serving certificate in o.CertSecret:
// created once, shared by the replicas, renewed before expiry.
func manageCertificate(ctx context.Context, cfg *rest.Config, m *spec.Module, o Options, log logr.Logger) (*certs.SecretManager, error) {
	hosts := o.CertHosts
	if len(hosts) == 0 {
		svc := m.Name + "." + m.Namespace + ".svc"
		hosts = []string{svc, svc + ".cluster.local", "127.0.0.1"}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mgr := certs.NewSecretManager(cs, certs.SecretOptions{Namespace: m.Namespace, Name: o.CertSecret, Hosts: hosts, Log: log})
	if err := mgr.Ensure(ctx); err != nil {
		return nil, err
	}
	go mgr.Run(ctx, time.Minute)
	return mgr, nil
}

// register fills the module's webhook configurations once the role is
// listening and ready, and then keeps them true.
func register(ctx context.Context, cfg *rest.Config, m *spec.Module, o Options, log logr.Logger, r *role, serve *webhook.Options, caBundle func() []byte, listening <-chan struct{}) error {
	reg, err := newRegistrar(cfg, m, true, log, clientConfig(m, o.WebhookURL), caBundle)
	if err != nil {
		return err
	}
	reg.SetLease(cmp.Or(o.LeaseDuration, registration.DefaultLeaseDuration), cmp.Or(os.Getenv("POD_NAME"), m.Name+"@"+m.Version))
	// Set before serving: the handler reads it.
	r.newer.read = reg.Newer
	problems := &registrationProblems{log: log, sink: podevents.For(cfg, m.Name, -1), notify: r.registrationProblem, metrics: newRegistrationMetrics(r.registry, m.Name)}
	serve.ReadyDetail = problems.detail
	reg.OnStuck(problems.stuck)
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-listening:
		}
		go reg.Heartbeat(ctx, r.ready)
		if err := reg.InjectCABundle(ctx); err != nil {
			log.Error(err, "fail-closed webhook configurations: put the serving CA in")
		}
		// The audit of what got in before is the watcher's: see
		// internal/serving/audit.
		registerWhenReady(ctx, log, listening, r.ready, reg, problems)
		watchRegistration(ctx, log, reg, problems, o.CheckInterval)
	}()
	return nil
}

// role is the admission role's state: its handler, metrics and readiness.
type role struct {
	handler       *admit.Handler
	registry      *prometheus.Registry
	metrics       *admit.Metrics
	configMissing prometheus.Gauge
	ready         func() error
	// health follows the listers' informers.
	health *watchhealth.Tracker
	// newer tells the handler whether a newer version registered.
	newer *newerCheck
}

// start connects the module's Store and listers and builds the handler of
// its bindings.
func start(ctx context.Context, cfg *rest.Config, m *spec.Module, handoffDir string, log logr.Logger, marks *startup, health *watchhealth.Tracker, binder *rolebind.Binder) (*role, error) {
	st, err := store.New(cfg, store.Options{Namespace: m.Namespace, Name: m.Name, Logger: log})
	if err != nil {
		return nil, err
	}
	if err := st.Start(ctx); err != nil {
		return nil, fmt.Errorf("admission needs the module's Store: %w", err)
	}
	marks.store = time.Since(processStart)
	marks.storeSynced = st.Synced
	listers := func() error { return nil }
	calls := &callctx.Role{Config: cfg, Scheme: m.Scheme, Module: st}
	go callctx.StoreReady(callctx.With(ctx, calls, st), st, m.StoreReady, log)
	if len(m.Listers) > 0 {
		// The cache starts once the API server serves the listers' kinds:
		// a CRD installed after the module is waited for, never an exit.
		listers, err = informers.StartCache(ctx, cfg, m.Name, m.Scheme, m.Listers, log, podevents.For(cfg, m.Name, -1), health, binder, func(c cache.Cache) error {
			barriers, err := informers.Barriers(cfg, m.Scheme, c, m.Listers, m.BindingTimeout())
			if err != nil {
				return err
			}
			// The module's listers read them from their handlers' context.
			calls.SetCache(c, barriers)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("admission's listers: %w", err)
		}
	}
	marks.listersSynced = func() bool { return listers() == nil }

	timeout := m.BindingTimeout()
	r := &role{registry: prometheus.NewRegistry(), newer: &newerCheck{timeout: timeout}, health: health}
	r.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), watchhealth.Collector())
	if r.metrics, err = admit.NewMetrics(r.registry, m.Name); err != nil {
		return nil, err
	}
	r.configMissing = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "vigil", Subsystem: "registration", Name: "configuration_missing",
		Help:        "1 while one of the module's webhook configurations is missing (deleted, not recreated), else 0.",
		ConstLabels: prometheus.Labels{"module": m.Name},
	})
	r.registry.MustRegister(r.configMissing)
	scope := func(capability string) store.Store {
		if capability == "" {
			return st
		}
		return st.Scope(capability)
	}
	calls.Scope = scope
	r.handler = admit.NewHandler(m.Bindings, admit.Options{
		Module: m.Name,
		// Handlers log as the role does (logr.FromContext), as the
		// watcher's do.
		Context: func(ctx context.Context, s store.Store) context.Context {
			return logr.NewContext(callctx.With(ctx, calls, s), log)
		},
		FailurePolicy: m.FailurePolicy,
		Policies:      m.Policies(),
		Timeout:       timeout,
		Metrics:       r.metrics,
		Log:           log,
		Store:         scope,
		Newer:         r.newer.Newer,
		Recheck:       len(m.Listers) > 0,
		LogDecisions:  admit.DecisionLogFromEnv(log),
		Hooks:         m.Hooks,
	})
	var gateNames []string
	for _, g := range m.Gates() {
		gateNames = append(gateNames, g.Name)
	}
	r.ready = func() error {
		var missing []string
		for _, g := range gateNames {
			if _, err := os.Stat(handoff.Path(handoffDir, g)); err != nil {
				missing = append(missing, g)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("the results of gates %v are not in %s yet: their init containers have not run", missing, handoffDir)
		}
		if !st.Synced() {
			return errors.New("the Store is not synced yet")
		}
		if err := listers(); err != nil {
			return err
		}
		return health.Check()
	}
	return r, nil
}

// registrationProblem feeds the metric of a missing configuration.
func (r *role) registrationProblem(err error) {
	if err != nil {
		r.configMissing.Set(1)
	} else {
		r.configMissing.Set(0)
	}
}

// startup records how long each part of the role's start took, since the
// process started, and logs it once the role is ready (AdmissionReady).
type startup struct {
	init, store, listening     time.Duration
	storeSynced, listersSynced func() bool
}

// logWhenReady waits, asking every millisecond, until ready passes, and logs
// when each part was done.
func (s *startup) logWhenReady(ctx context.Context, log logr.Logger, ready func() error) {
	var storeSynced, listersSynced time.Duration
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		now := time.Since(processStart)
		if storeSynced == 0 && s.storeSynced() {
			storeSynced = now
		}
		if listersSynced == 0 && s.listersSynced() {
			listersSynced = now
		}
		if ready() == nil {
			events.Info(log, events.AdmissionReady, "admission ready", "init_ms", ms(s.init), "store_ms", ms(s.store),
				"listening_ms", ms(s.listening), "store_synced_ms", ms(storeSynced), "listers_synced_ms", ms(listersSynced), "ready_ms", ms(now))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }
