package admit

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// call runs fn as a binding's run does, with recovered deferred.
func call(fn func() (admission.Verdict, error)) (v admission.Verdict, err error) {
	defer recovered(&err)
	return fn()
}

func TestRecoveredTurnsAPanicIntoAnErrorWithItsStack(t *testing.T) {
	_, err := call(func() (admission.Verdict, error) { panic("boom") })
	if err == nil {
		t.Fatal("a panicking binding returned no error")
	}
	first, stack, _ := strings.Cut(err.Error(), "\n")
	if first != "panic: boom" {
		t.Errorf("first line = %q, want %q", first, "panic: boom")
	}
	if !strings.Contains(stack, "goroutine ") || strings.Count(stack, "\n") > 11 {
		t.Errorf("stack = %q, want the first 12 lines of the goroutine's stack", stack)
	}
	v, err := call(func() (admission.Verdict, error) { return admission.Deny("no"), nil })
	if err != nil || v.Allowed() || v.Message() != "no" {
		t.Errorf("call of a denial = %v, %v; want the denial, no error", v, err)
	}
}

func TestFailureAnswerPerPolicyToAnErrorAndAPanic(t *testing.T) {
	b := stageBinding("signing", "signed", spec.Enforce)
	_, panicked := call(func() (admission.Verdict, error) { panic("boom") })
	for _, c := range []struct {
		name string
		err  error
		what string // the first line of err, as the client reads it
	}{
		{"error", errors.New("registry unreachable"), "registry unreachable"},
		{"panic", panicked, "panic: boom"},
	} {
		id := bindingID(b)
		if id != `capability "signing" binding "signed"` {
			t.Fatalf("bindingID = %q", id)
		}

		fail := failureAnswer("mod", admission.Fail, id, c.err)
		want := `vigil module mod: capability "signing" binding "signed" failed (failurePolicy Fail): ` + c.what
		if fail.Allowed || fail.Result == nil || len(fail.Warnings) != 0 {
			t.Fatalf("%s, Fail: %+v, want a denial with a status and no warnings", c.name, fail)
		}
		if r := fail.Result; r.Message != want || r.Code != http.StatusInternalServerError || r.Reason != metav1.StatusReasonInternalError || r.Status != metav1.StatusFailure {
			t.Errorf("%s, Fail: result %+v, want 500 InternalError %q", c.name, r, want)
		}

		ignore := failureAnswer("mod", admission.Ignore, id, c.err)
		want = `vigil module mod: capability "signing" binding "signed" failed and was skipped (failurePolicy Ignore): ` + c.what
		if !ignore.Allowed || ignore.Result != nil || !slices.Equal(ignore.Warnings, []string{want}) {
			t.Errorf("%s, Ignore: %+v, want allowed with the warning %q", c.name, ignore, want)
		}
	}
	if id := bindingID(nil); id != "unknown" {
		t.Errorf("bindingID(nil) = %q, want unknown", id)
	}
}

func TestFailedAnswersByTheCapabilitysPolicyAndLogsTheStack(t *testing.T) {
	h, _, logs := stageHandler(t, Options{FailurePolicy: admission.Fail, Policies: map[string]admission.FailurePolicy{"lenient": admission.Ignore}})
	_, panicked := call(func() (admission.Verdict, error) { panic("boom") })

	strict := stageBinding("strict", "check", spec.Enforce)
	if got := h.policyFor(strict); got != admission.Fail {
		t.Errorf("policyFor(strict) = %q, want the module's Fail", got)
	}
	if resp := h.failed(strict, "apps", panicked); resp.Allowed {
		t.Errorf("strict: a panic was allowed: %+v", resp)
	}
	lenient := stageBinding("lenient", "check", spec.Enforce)
	if got := h.policyFor(lenient); got != admission.Ignore {
		t.Errorf("policyFor(lenient) = %q, want its own Ignore", got)
	}
	if resp := h.failed(lenient, "apps", panicked); !resp.Allowed || len(resp.Warnings) != 1 || strings.Contains(resp.Warnings[0], "goroutine") {
		t.Errorf("lenient: %+v, want allowed with a one-line warning", resp)
	}
	if got := h.policyFor(nil); got != admission.Fail {
		t.Errorf("policyFor(nil) = %q, want the module's Fail", got)
	}
	for _, c := range []string{"strict", "lenient"} {
		lines := logs.with("admission binding failed", `capability \"`+c+`\"`, "goroutine ")
		if len(lines) != 1 {
			t.Errorf("%s: %d log lines with the failure and its stack, want 1; log: %q", c, len(lines), logs.lines)
		}
	}
	// A namespace policy answers for the requests of its namespaces, and
	// only those.
	mixed := stageBinding("strict", "check", spec.Enforce)
	mixed.NamespacePolicies = []spec.NamespacePolicy{{Policy: admission.Ignore, Namespaces: []string{"istio-system"}}}
	if resp := h.failed(mixed, "istio-system", panicked); !resp.Allowed {
		t.Errorf("a failure in istio-system, which the capability's namespace policy answers with Ignore: %+v, want allowed", resp)
	}
	if resp := h.failed(mixed, "apps", panicked); resp.Allowed {
		t.Errorf("a failure in apps, which no namespace policy names: %+v, want the capability's Fail", resp)
	}
}

func TestATimeoutIsAnsweredByThePolicyAndCounted(t *testing.T) {
	h, reg, _ := stageHandler(t, Options{FailurePolicy: admission.Fail, Timeout: 1500 * time.Millisecond})
	b := stageBinding("signing", "slow", spec.Enforce)
	rv := &reviewRun{h: h, req: stageRequest()}
	rv.current.Store(b)
	resp := h.timedOut(rv)
	want := `vigil module mod: capability "signing" binding "slow" failed (failurePolicy Fail): did not finish within 1.5s`
	if resp.Allowed || resp.Result == nil || resp.Result.Message != want {
		t.Errorf("timedOut = %+v, want denied with %q", resp, want)
	}
	labels := map[string]string{"capability": "signing", "binding": "slow", "action": "validate", "verdict": "timeout"}
	if n, _, _ := sample(t, reg, "vigil_admission_binding_requests_total", labels); n != 1 {
		t.Errorf("timeouts counted = %v, want 1", n)
	}
	if sum, n, _ := sample(t, reg, "vigil_admission_binding_duration_seconds", labels); n != 1 || sum != 1.5 {
		t.Errorf("timeout duration: %d samples summing to %v, want 1 of the deadline, 1.5", n, sum)
	}
}
