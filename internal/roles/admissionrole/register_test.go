package admissionrole

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

type recorded struct {
	mu      sync.Mutex
	reasons []string
}

func (r *recorded) Event(warning bool, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, reason)
}

func (r *recorded) has(reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.reasons, reason)
}

func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if out.Counter != nil {
		return out.Counter.GetValue()
	}
	return out.Gauge.GetValue()
}

// Drift shows in /readyz's detail and a gauge while it lasts; its repair
// clears both, counts, and is an Event on the pod.
func TestRegistrationProblemsReportDriftWhileWrong(t *testing.T) {
	sink := &recorded{}
	metrics := newRegistrationMetrics(prometheus.NewRegistry(), "m")
	p := &registrationProblems{log: logr.Discard(), sink: sink, metrics: metrics}
	if d := p.detail(); d != "" {
		t.Fatalf("detail %q before anything went wrong", d)
	}
	drift := []string{`mutating webhook configuration "m": webhook a: failurePolicy Ignore (want Fail)`}
	p.drifted(drift)
	if d := p.detail(); !strings.Contains(d, "warning: webhook configurations drifted") || !strings.Contains(d, "failurePolicy Ignore (want Fail)") {
		t.Fatalf("detail %q while drifted", d)
	}
	if v := value(t, metrics.drifted); v != 1 {
		t.Fatalf("drifted gauge %v while drifted", v)
	}
	p.report(errors.New("webhook configuration missing: validating"))
	if d := p.detail(); !strings.Contains(d, "missing") || !strings.Contains(d, "drifted") {
		t.Fatalf("detail %q: want both the missing configuration and the drift", d)
	}
	p.clear()
	p.repaired(drift, 30*time.Millisecond)
	if d := p.detail(); d != "" {
		t.Fatalf("detail %q after the repair", d)
	}
	if v := value(t, metrics.drifted); v != 0 {
		t.Fatalf("drifted gauge %v after the repair", v)
	}
	if v := value(t, metrics.repairs); v != 1 {
		t.Fatalf("repairs %v, want 1", v)
	}
	// The drift's Event is sent asynchronously; the repair's and the missing
	// configuration's synchronously.
	if !sink.has("WebhookConfigurationMissing") || !sink.has("WebhookConfigurationRepaired") {
		t.Fatalf("Events %v", sink.reasons)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !sink.has("WebhookConfigurationDrifted") {
		if time.Now().After(deadline) {
			t.Fatal("no WebhookConfigurationDrifted Event")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A registration that cannot finish shows in /readyz's detail, a gauge and
// an Event, saying why; the canary reaching the module clears it.
func TestRegistrationProblemsReportAStuckRegistration(t *testing.T) {
	sink := &recorded{}
	metrics := newRegistrationMetrics(prometheus.NewRegistry(), "m")
	p := &registrationProblems{log: logr.Discard(), sink: sink, metrics: metrics}
	problem := errors.New(`the canary was refused without reaching the module: "ValidatingAdmissionPolicy 'x' denied request"`)
	p.stuck(problem)
	if d := p.detail(); !strings.Contains(d, "warning: the registration cannot finish: ") || !strings.Contains(d, "ValidatingAdmissionPolicy 'x' denied request") {
		t.Fatalf("detail %q while stuck", d)
	}
	if v := value(t, metrics.stuck); v != 1 {
		t.Fatalf("stuck gauge %v while stuck", v)
	}
	if !sink.has("RegistrationStuck") {
		t.Fatalf("Events %v: want RegistrationStuck", sink.reasons)
	}
	p.stuck(nil)
	if d := p.detail(); d != "" {
		t.Fatalf("detail %q once the canary reaches the module", d)
	}
	if v := value(t, metrics.stuck); v != 0 {
		t.Fatalf("stuck gauge %v once the canary reaches the module", v)
	}
}
