package admit

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Metrics are the admission handler's Prometheus metrics.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// unattributed counts requests for a path, kind or operation the
	// module does not serve, by reason and answer.
	unattributed *prometheus.CounterVec
	rechecks     *prometheus.CounterVec
	fresh        prometheus.Histogram
	// unenforced counts denials answered as allows: capabilities in Warn
	// or Audit mode.
	unenforced *prometheus.CounterVec
	// observers holds each binding's counter and histogram by verdict,
	// looked up once rather than by their labels on every request.
	observers sync.Map // observerKey -> *observers
}

type observerKey struct {
	b       *spec.Binding
	verdict string
}

type observers struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// NewMetrics registers the admission metrics with reg.
func NewMetrics(reg prometheus.Registerer, module string) (*Metrics, error) {
	labels := []string{"capability", "binding", "action", "verdict"}
	constLabels := prometheus.Labels{"module": module}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "vigil", Subsystem: "admission", Name: "binding_requests_total",
			Help:        "Admission requests a binding ran for, by verdict (allowed, warned, denied, mutated, error, timeout).",
			ConstLabels: constLabels,
		}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "vigil", Subsystem: "admission", Name: "binding_duration_seconds",
			Help:        "Time a binding took to answer one admission request, by verdict.",
			ConstLabels: constLabels,
			Buckets:     []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, labels),
	}
	m.unattributed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "vigil", Subsystem: "admission", Name: "unattributed_total",
		Help:        "Admission requests for a path (reason=path), or a kind and operation (reason=kind), that this module version does not serve, by answer: failure_policy, or newer_version (allowed during a rollout while a newer version is registered).",
		ConstLabels: constLabels,
	}, []string{"reason", "answer"})
	m.rechecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "vigil", Subsystem: "admission", Name: "rechecks_total",
		Help:        "Decisions made again once the listers a binding read had caught up with the API server (a denial, or an allow after a lister read found an object), by outcome: same, changed, or failed (the failure policy answered).",
		ConstLabels: constLabels,
	}, []string{"capability", "binding", "outcome"})
	m.fresh = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "vigil", Subsystem: "admission", Name: "freshness_wait_seconds",
		Help:        "Time a recheck waited for the listers it read to catch up with the API server.",
		ConstLabels: constLabels,
		Buckets:     []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
	})
	m.unenforced = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "vigil", Subsystem: "admission", Name: "unenforced_denials_total",
		Help:        "Denials of validations whose capability is in Warn or Audit mode, answered as allows (with a warning in Warn mode, recorded as an audit-finding log line in Audit mode), by mode.",
		ConstLabels: constLabels,
	}, []string{"capability", "binding", "mode"})
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.unattributed, m.rechecks, m.fresh, m.unenforced} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observe(b *spec.Binding, verdict string, d time.Duration) {
	key := observerKey{b, verdict}
	o, ok := m.observers.Load(key)
	if !ok {
		values := []string{b.Capability, b.Name, b.Action.String(), verdict}
		o, _ = m.observers.LoadOrStore(key, &observers{requests: m.requests.WithLabelValues(values...), duration: m.duration.WithLabelValues(values...)})
	}
	obs := o.(*observers)
	obs.requests.Inc()
	obs.duration.Observe(d.Seconds())
}

func (m *Metrics) unenforcedDenial(b *spec.Binding) {
	m.unenforced.WithLabelValues(b.Capability, b.Name, string(b.Mode)).Inc()
}

func (m *Metrics) recheck(b *spec.Binding, outcome string, wait time.Duration) {
	m.rechecks.WithLabelValues(b.Capability, b.Name, outcome).Inc()
	m.fresh.Observe(wait.Seconds())
}

// The handler's metrics stage: each records nothing when the handler has no
// Metrics.

// observe counts a binding's run for one request and how long it took, by
// its verdict (verdictLabel, or timeout).
func (h *Handler) observe(b *spec.Binding, verdict string, d time.Duration) {
	if h.opts.Metrics == nil || b == nil {
		return
	}
	h.opts.Metrics.observe(b, verdict, d)
}

// recheck counts a decision made again on fresh data, by outcome (same,
// changed, failed), and how long it waited for the listers.
func (h *Handler) recheck(b *spec.Binding, outcome string, wait time.Duration) {
	if h.opts.Metrics != nil {
		h.opts.Metrics.recheck(b, outcome, wait)
	}
}

// unenforcedDenial counts a denial answered as an allow: its capability is
// in Warn or Audit mode.
func (h *Handler) unenforcedDenial(b *spec.Binding) {
	if h.opts.Metrics != nil {
		h.opts.Metrics.unenforcedDenial(b)
	}
}

// count counts a request the handler could not attribute, by reason and
// answer.
func (h *Handler) count(reason, answer string) {
	if h.opts.Metrics != nil {
		h.opts.Metrics.unattributed.WithLabelValues(reason, answer).Inc()
	}
}

// verdictLabel is the verdict label of a binding's run: error when it
// failed; else mutated for a mutation, and denied, warned or allowed for a
// validation.
func verdictLabel(action spec.Action, v admission.Verdict, err error) string {
	switch {
	case err != nil:
		return "error"
	case action == spec.Mutate:
		return "mutated"
	case !v.Allowed():
		return "denied"
	case len(v.Warnings()) > 0:
		return "warned"
	default:
		return "allowed"
	}
}
