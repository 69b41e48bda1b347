package registration

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// DefaultOutageInterval is how often Outages checks by default.
const DefaultOutageInterval = 2 * time.Second

// Outages is what the module's watcher runs while it leads, for a module
// with FailOpenAfter: WatchOutages every interval (DefaultOutageInterval
// when zero), with what it fails open counted in the vigil_outage metrics.
func Outages(cfg *rest.Config, m *spec.Module, log logr.Logger, interval time.Duration) (func(ctx context.Context) error, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	met := registerOutageMetrics()
	observed := func(failedOpen, changed []string) {
		met.failedOpen.WithLabelValues(m.Name).Set(float64(len(failedOpen)))
		for _, w := range changed {
			met.failOpens.WithLabelValues(m.Name, w).Inc()
		}
	}
	r := New(cs, Options{Module: m.Name, Namespace: m.Namespace, Version: m.Version, Bindings: m.Bindings, Policies: m.Policies(), Log: log,
		OutageObserved: observed})
	if interval <= 0 {
		interval = DefaultOutageInterval
	}
	return func(ctx context.Context) error { return r.WatchOutages(ctx, interval) }, nil
}

type outageMetrics struct {
	failOpens  *prometheus.CounterVec
	failedOpen *prometheus.GaugeVec
}

var (
	outageMetricsOnce sync.Once
	outageShared      *outageMetrics
)

// registerOutageMetrics registers the outage metrics with the process's
// metrics registry, once.
func registerOutageMetrics() *outageMetrics {
	outageMetricsOnce.Do(func() {
		outageShared = &outageMetrics{
			failOpens: prometheus.NewCounterVec(prometheus.CounterOpts{
				Namespace: "vigil", Subsystem: "outage", Name: "fail_opens_total",
				Help: "Webhooks the watcher set to failurePolicy Ignore because no admission replica served within their capability's FailOpenAfter bound.",
			}, []string{"module", "webhook"}),
			failedOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Namespace: "vigil", Subsystem: "outage", Name: "failed_open_webhooks",
				Help: "Webhooks failed open now (failurePolicy Ignore during an outage), as the last outage check saw them.",
			}, []string{"module"}),
		}
		ctrlmetrics.Registry.MustRegister(outageShared.failOpens, outageShared.failedOpen)
	})
	return outageShared
}
