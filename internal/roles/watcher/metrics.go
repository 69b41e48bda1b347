package watcher

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/vigilkit/vigil/internal/runtime/watchhealth"
)

// metrics are the watcher's own; controller-runtime adds, per binding's
// controller, queue depth (workqueue_depth), reconcile latency
// (controller_runtime_reconcile_time_seconds) and errors
// (controller_runtime_reconcile_errors_total).
type metrics struct {
	events          *prometheus.CounterVec
	panics          *prometheus.CounterVec
	scheduleRuns    *prometheus.CounterVec
	scheduleSkipped *prometheus.CounterVec
	scheduleSeconds *prometheus.HistogramVec
}

var (
	metricsOnce sync.Once
	shared      *metrics
)

// registerMetrics registers the metrics in controller-runtime's registry,
// which the manager serves, once per process.
func registerMetrics() *metrics {
	metricsOnce.Do(func() {
		shared = &metrics{
			events: prometheus.NewCounterVec(prometheus.CounterOpts{
				Namespace: "vigil", Subsystem: "watch", Name: "events_total",
				Help: "Events delivered to Watch bindings.",
			}, []string{"module", "binding", "event"}),
			panics: prometheus.NewCounterVec(prometheus.CounterOpts{
				Namespace: "vigil", Subsystem: "watch", Name: "handler_panics_total",
				Help: "Watch, Reconcile and Finalize handlers that panicked.",
			}, []string{"module", "binding"}),
			scheduleRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
				Namespace: "vigil", Subsystem: "schedule", Name: "runs_total",
				Help: "Runs of schedules, by result.",
			}, []string{"module", "schedule", "result"}),
			scheduleSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
				Namespace: "vigil", Subsystem: "schedule", Name: "skipped_total",
				Help: "Ticks not run: passed while the previous run was still going, or while no watcher ran (beyond the one run that makes them up).",
			}, []string{"module", "schedule"}),
			scheduleSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Namespace: "vigil", Subsystem: "schedule", Name: "run_seconds",
				Help: "How long schedule runs take.",
			}, []string{"module", "schedule"}),
		}
		ctrlmetrics.Registry.MustRegister(shared.events, shared.panics, shared.scheduleRuns, shared.scheduleSkipped, shared.scheduleSeconds,
			watchhealth.Collector())
	})
	return shared
}
