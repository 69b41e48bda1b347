package informers

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// metrics are the shared informers' own, in controller-runtime's registry,
// which the watcher's manager serves.
type metrics struct {
	watchErrors *prometheus.CounterVec
}

var (
	metricsOnce sync.Once
	shared      *metrics
)

// registerMetrics registers the metrics once per process.
func registerMetrics() *metrics {
	metricsOnce.Do(func() {
		shared = &metrics{
			watchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
				Namespace: "vigil", Subsystem: "watch", Name: "errors_total",
				Help: "Watches of the shared informers that ended in error, by reason; expired (410 Gone) ones are followed by a relist.",
			}, []string{"module", "reason"}),
		}
		ctrlmetrics.Registry.MustRegister(shared.watchErrors)
	})
	return shared
}
