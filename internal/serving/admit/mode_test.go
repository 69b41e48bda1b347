package admit_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/admit"
)

// logLines collects a handler's log lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, args)
}

func (l *logLines) with(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// modal is a handler of validations, each in the capability and mode given.
func modal(t *testing.T, bindings ...spec.Binding) (*admit.Handler, *prometheus.Registry, *logLines) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := admit.NewMetrics(reg, "mod")
	if err != nil {
		t.Fatal(err)
	}
	logs := &logLines{}
	for i := range bindings {
		bindings[i].Operations = []admissionv1.Operation{admissionv1.Create, admissionv1.Update}
	}
	h := admit.NewHandler(bindings, admit.Options{Module: "mod", FailurePolicy: admission.Fail, Timeout: time.Second, Metrics: m, Log: funcr.NewJSON(logs.add, funcr.Options{})})
	return h, reg, logs
}

func denying(capability, name string, mode spec.Mode, msg string) spec.Binding {
	b := admit.ValidateBinding(gvk, &corev1.Pod{}, func(context.Context, *admission.Request[*corev1.Pod]) admission.Verdict {
		return admission.Deny(msg)
	})
	b.Capability, b.Name, b.Mode = capability, name, mode
	return b
}

// unenforced reads vigil_admission_unenforced_denials_total for a binding.
func unenforced(t *testing.T, reg *prometheus.Registry, capability, binding, mode string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "vigil_admission_unenforced_denials_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["capability"] == capability && labels["binding"] == binding && labels["mode"] == mode && labels["module"] == "mod" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestEnforceModeDenies(t *testing.T) {
	for _, mode := range []spec.Mode{spec.Enforce, ""} {
		h, reg, _ := modal(t, denying("policies", "no-latest", mode, "pin the image"))
		_, resp := post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
		if resp == nil || resp.Allowed || resp.Result.Message != "pin the image" {
			t.Fatalf("mode %q: response %+v, want the denial", mode, resp)
		}
		if n := unenforced(t, reg, "policies", "no-latest", string(mode)); n != 0 {
			t.Errorf("mode %q: %v unenforced denials counted, want 0", mode, n)
		}
	}
}

func TestWarnModeAllowsWithTheDenialAsWarning(t *testing.T) {
	h, reg, logs := modal(t,
		denying("trial", "no-latest", spec.Warn, "pin the image"),
		admit.ValidateBinding(gvk, &corev1.Pod{}, func(context.Context, *admission.Request[*corev1.Pod]) admission.Verdict {
			return admission.Warn("requests should be set")
		}),
	)
	_, resp := post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
	if resp == nil || !resp.Allowed || resp.Result != nil {
		t.Fatalf("response %+v, want allowed", resp)
	}
	want := []string{
		`vigil module mod: capability "trial" binding "no-latest" would deny this (mode Warn, not enforced): pin the image`,
		"requests should be set", // the bindings after it still ran
	}
	if strings.Join(resp.Warnings, "|") != strings.Join(want, "|") {
		t.Errorf("warnings %q, want %q", resp.Warnings, want)
	}
	if n := unenforced(t, reg, "trial", "no-latest", "Warn"); n != 1 {
		t.Errorf("vigil_admission_unenforced_denials_total{mode=Warn} = %v, want 1", n)
	}
	if n := len(logs.with("audit-finding")); n != 0 {
		t.Errorf("%d audit findings logged in Warn mode, want none", n)
	}
}

func TestAuditModeAllowsSilentlyAndRecordsAFinding(t *testing.T) {
	h, reg, logs := modal(t, denying("trial", "no-latest", spec.Audit, "pin the image"))
	_, resp := post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
	if resp == nil || !resp.Allowed || resp.Result != nil || len(resp.Warnings) != 0 {
		t.Fatalf("response %+v, want allowed without warnings", resp)
	}
	if n := unenforced(t, reg, "trial", "no-latest", "Audit"); n != 1 {
		t.Errorf("vigil_admission_unenforced_denials_total{mode=Audit} = %v, want 1", n)
	}
	findings := logs.with(`"event":"audit-finding"`)
	if len(findings) != 1 {
		t.Fatalf("findings logged %q, want one", logs.lines)
	}
	for _, want := range []string{`"capability":"trial"`, `"binding":"no-latest"`, `"mode":"Audit"`, `"operation":"CREATE"`, `"kind":"Pod"`, `"namespace":"apps"`, `"name":"web"`, `"violation":"pin the image"`} {
		if !strings.Contains(findings[0], want) {
			t.Errorf("finding %s lacks %s", findings[0], want)
		}
	}
}

func TestModesAreEachCapabilitysOwn(t *testing.T) {
	// A Warn capability's denial does not excuse an enforced one's.
	h, _, logs := modal(t,
		denying("trial", "no-latest", spec.Warn, "pin the image"),
		denying("audited", "no-root", spec.Audit, "run as non-root"),
		denying("policies", "no-privileged", spec.Enforce, "no privileged pods"),
	)
	_, resp := post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
	if resp == nil || resp.Allowed || resp.Result.Message != "no privileged pods" {
		t.Fatalf("response %+v, want the enforced capability's denial", resp)
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "pin the image") {
		t.Errorf("warnings %q, want the Warn capability's denial", resp.Warnings)
	}
	if n := len(logs.with("run as non-root")); n != 1 {
		t.Errorf("%d findings of the Audit capability, want 1", n)
	}
}

func TestModesLeaveFailuresAndMutationsToTheFailurePolicy(t *testing.T) {
	failing := admit.ValidateBinding(gvk, &corev1.Pod{}, func(context.Context, *admission.Request[*corev1.Pod]) admission.Verdict {
		panic("boom")
	})
	failing.Capability, failing.Name, failing.Mode = "trial", "broken", spec.Audit
	mutating := admit.MutateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) error {
		if r.Object.Labels["fail"] == "yes" {
			return errors.New("cannot label")
		}
		r.SetLabel("team", "shop")
		return nil
	})
	mutating.Capability, mutating.Name, mutating.Mode = "trial", "label", spec.Warn
	h, _, _ := modal(t, failing, mutating)
	_, resp := post(t, h, admit.ValidatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
	if resp == nil || resp.Allowed || !strings.Contains(resp.Result.Message, "failurePolicy Fail") {
		t.Fatalf("a failing validation in Audit mode: %+v, want the failure policy's denial", resp)
	}
	_, resp = post(t, h, admit.MutatePath("mod"), "application/json", review(t, admissionv1.Create, pod(nil), nil))
	if resp == nil || !resp.Allowed || !strings.Contains(string(resp.Patch), "/metadata/labels") {
		t.Fatalf("a mutation in Warn mode: %+v, want its patch", resp)
	}
	_, resp = post(t, h, admit.MutatePath("mod"), "application/json", review(t, admissionv1.Create, pod(map[string]string{"fail": "yes"}), nil))
	if resp == nil || resp.Allowed {
		t.Fatalf("a failing mutation in Warn mode: %+v, want the failure policy's denial", resp)
	}
}

func TestTheAuditJudgesEveryModeAsEnforced(t *testing.T) {
	passing := admit.ValidateBinding(gvk, &corev1.Pod{}, func(context.Context, *admission.Request[*corev1.Pod]) admission.Verdict {
		return admission.Allow()
	})
	passing.Capability, passing.Name = "lenient", "ok"
	h, reg, _ := modal(t,
		denying("trial", "no-latest", spec.Audit, "pin the image"),
		passing,
		denying("policies", "no-privileged", spec.Enforce, "no privileged pods"),
		denying("policies", "never-reached", spec.Enforce, "the first denial of a capability answers"),
	)
	rv, err := admit.DecodeReview(review(t, admissionv1.Create, pod(nil), nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []admit.Denial{{Capability: "trial", Message: "pin the image"}, {Capability: "policies", Message: "no privileged pods"}}
	if got := h.Audit(t.Context(), rv.Request); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Audit = %+v, want each capability's denial, the Audit-mode one's included: %+v", got, want)
	}
	if n := unenforced(t, reg, "trial", "no-latest", "Audit"); n != 0 {
		t.Errorf("the audit counted %v unenforced denials, want 0", n)
	}
}
