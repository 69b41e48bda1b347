package admit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/admit"
)

// Each capability is served on its own path with its bindings alone; one
// with an opt-out label is served there only: its webhooks skip what opted
// out, the shared ones do not, so a request on the shared path must not run
// its bindings, nor one on its path the others'.
func TestOptOutCapabilityIsServedOnItsOwnPath(t *testing.T) {
	deny := func(msg string) func(context.Context, *admission.Request[*corev1.Pod]) admission.Verdict {
		return func(context.Context, *admission.Request[*corev1.Pod]) admission.Verdict { return admission.Deny(msg) }
	}
	shared := admit.ValidateBinding(gvk, &corev1.Pod{}, deny("shared"))
	shared.Capability, shared.Name = "policies", "shared"
	own := admit.ValidateBinding(gvk, &corev1.Pod{}, deny("own"))
	own.Capability, own.Name, own.OptOut = "quota", "own", "vigil.dev/ignore"
	for _, b := range []*spec.Binding{&shared, &own} {
		b.Operations = []admissionv1.Operation{admissionv1.Create}
	}
	h := admit.NewHandler([]spec.Binding{shared, own}, admit.Options{Module: "mod", Log: logr.Discard()})
	body := review(t, admissionv1.Create, pod(nil), nil)
	for path, want := range map[string]string{
		admit.ValidatePath("mod"):                           "shared",
		admit.CapabilityPath(spec.Validate, "mod", "quota"): "own",
	} {
		_, resp := post(t, h, path, "application/json", body)
		if resp == nil || resp.Allowed || resp.Result == nil || resp.Result.Message != want {
			t.Errorf("%s: response %+v: want denied by %q alone", path, resp, want)
		}
	}
	// Every capability is served on its own path too, with its bindings
	// alone: registration points each capability's webhook there, so that a
	// request two capabilities' webhooks match runs each binding once.
	if _, resp := post(t, h, admit.CapabilityPath(spec.Validate, "mod", "policies"), "application/json", body); resp == nil || resp.Allowed || resp.Result.Message != "shared" {
		t.Errorf("the path of the capability without an opt-out label: %+v: want denied by its binding alone", resp)
	}
	// A capability the module does not have is no path it serves: the
	// failure policy answers it.
	if _, resp := post(t, h, admit.CapabilityPath(spec.Validate, "mod", "other"), "application/json", body); resp == nil || resp.Allowed ||
		!strings.Contains(resp.Result.Message, "does not serve path /validate/mod/other") {
		t.Errorf("the path of a capability the module lacks: %+v: want it treated as any unserved path", resp)
	}
	// The audit, which no webhook calls, runs them all: each capability's
	// denial.
	if got := h.Audit(t.Context(), decoded(t, body)); len(got) != 2 || got[0].Message != "shared" || got[1].Message != "own" {
		t.Errorf("the audit found %+v, want both capabilities' denials", got)
	}
}

func decoded(t *testing.T, body []byte) *admissionv1.AdmissionRequest {
	t.Helper()
	r, err := admit.DecodeReview(body)
	if err != nil {
		t.Fatal(err)
	}
	return r.Request
}
