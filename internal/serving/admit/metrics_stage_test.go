package admit

import (
	"errors"
	"testing"
	"time"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

func TestVerdictLabelNamesEachOutcome(t *testing.T) {
	failed := errors.New("failed")
	for _, c := range []struct {
		action spec.Action
		v      admission.Verdict
		err    error
		want   string
	}{
		{spec.Validate, admission.Allow(), nil, "allowed"},
		{spec.Validate, admission.Warn("careful"), nil, "warned"},
		{spec.Validate, admission.Deny("no"), nil, "denied"},
		{spec.Validate, admission.Deny("no").WithWarnings("careful"), nil, "denied"},
		{spec.Validate, admission.Verdict{}, failed, "error"},
		{spec.Mutate, admission.Verdict{}, nil, "mutated"},
		{spec.Mutate, admission.Verdict{}, failed, "error"},
	} {
		if got := verdictLabel(c.action, c.v, c.err); got != c.want {
			t.Errorf("verdictLabel(%s, %+v, %v) = %q, want %q", c.action, c.v, c.err, got, c.want)
		}
	}
}

func TestMetricsCountEachBindingsRunsRechecksAndDenials(t *testing.T) {
	h, reg, _ := stageHandler(t, Options{})
	a := stageBinding("signing", "signed", spec.Warn)
	b := stageBinding("signing", "pinned", spec.Enforce)
	h.observe(a, "denied", 2*time.Millisecond)
	h.observe(a, "denied", 4*time.Millisecond)
	h.observe(a, "allowed", time.Millisecond)
	h.observe(b, "allowed", time.Millisecond)
	h.observe(nil, "timeout", time.Second) // no binding had started: nothing to count

	for _, c := range []struct {
		b       *spec.Binding
		verdict string
		n       float64
		sum     float64
	}{
		{a, "denied", 2, 0.006},
		{a, "allowed", 1, 0.001},
		{b, "allowed", 1, 0.001},
	} {
		labels := map[string]string{"capability": "signing", "binding": c.b.Name, "action": "validate", "verdict": c.verdict}
		if n, _, _ := sample(t, reg, "vigil_admission_binding_requests_total", labels); n != c.n {
			t.Errorf("requests of %s %s = %v, want %v", c.b.Name, c.verdict, n, c.n)
		}
		if sum, n, _ := sample(t, reg, "vigil_admission_binding_duration_seconds", labels); float64(n) != c.n || sum < c.sum-1e-9 || sum > c.sum+1e-9 {
			t.Errorf("duration of %s %s: %d samples summing to %v, want %v summing to %v", c.b.Name, c.verdict, n, sum, c.n, c.sum)
		}
	}
	if _, _, found := sample(t, reg, "vigil_admission_binding_requests_total", map[string]string{"capability": "signing", "binding": "pinned", "action": "validate", "verdict": "denied"}); found {
		t.Error("a verdict never observed has a series")
	}

	h.recheck(a, "changed", 10*time.Millisecond)
	h.recheck(a, "changed", 30*time.Millisecond)
	h.recheck(b, "failed", 0)
	if n, _, _ := sample(t, reg, "vigil_admission_rechecks_total", map[string]string{"capability": "signing", "binding": "signed", "outcome": "changed"}); n != 2 {
		t.Errorf("rechecks changed = %v, want 2", n)
	}
	if n, _, _ := sample(t, reg, "vigil_admission_rechecks_total", map[string]string{"capability": "signing", "binding": "pinned", "outcome": "failed"}); n != 1 {
		t.Errorf("rechecks failed = %v, want 1", n)
	}
	if sum, n, _ := sample(t, reg, "vigil_admission_freshness_wait_seconds", nil); n != 3 || sum < 0.04-1e-9 || sum > 0.04+1e-9 {
		t.Errorf("freshness waits: %d summing to %v, want 3 summing to 0.04", n, sum)
	}

	h.unenforcedDenial(a)
	if n, _, _ := sample(t, reg, "vigil_admission_unenforced_denials_total", map[string]string{"capability": "signing", "binding": "signed", "mode": "Warn"}); n != 1 {
		t.Errorf("unenforced denials = %v, want 1", n)
	}

	h.count(UnattributedKind, AnswerRollout)
	h.count(UnattributedPath, AnswerFailurePolicy)
	h.count(UnattributedPath, AnswerFailurePolicy)
	if n, _, _ := sample(t, reg, "vigil_admission_unattributed_total", map[string]string{"reason": "kind", "answer": "newer_version"}); n != 1 {
		t.Errorf("unattributed kind/newer_version = %v, want 1", n)
	}
	if n, _, _ := sample(t, reg, "vigil_admission_unattributed_total", map[string]string{"reason": "path", "answer": "failure_policy"}); n != 2 {
		t.Errorf("unattributed path/failure_policy = %v, want 2", n)
	}
}

func TestAHandlerWithoutMetricsCountsNothingAndGoesOn(t *testing.T) {
	h := NewHandler(nil, Options{Module: "mod"})
	b := stageBinding("signing", "signed", spec.Warn)
	// None of these may panic for want of Metrics.
	h.observe(b, "denied", time.Millisecond)
	h.recheck(b, "same", time.Millisecond)
	h.unenforcedDenial(b)
	h.count(UnattributedPath, AnswerFailurePolicy)
}
