package admit

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/spec"
)

// timedOut answers for a run whose binding did not finish in time.
func (h *Handler) timedOut(rv *reviewRun) *admissionv1.AdmissionResponse {
	b := rv.current.Load()
	h.observe(b, "timeout", h.opts.Timeout)
	return h.failed(b, fmt.Errorf("did not finish within %s", h.opts.Timeout))
}

// call runs a binding's function, turning a panic into an error.
func call(fn func() (admission.Verdict, error)) (v admission.Verdict, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, firstFrames(debug.Stack(), 12))
		}
	}()
	return fn()
}

func firstFrames(stack []byte, lines int) string {
	parts := strings.SplitN(string(stack), "\n", lines+1)
	if len(parts) > lines {
		parts = parts[:lines]
	}
	return strings.Join(parts, "\n")
}

// failed answers for a binding that failed, by the failure policy.
func (h *Handler) failed(b *spec.Binding, err error) *admissionv1.AdmissionResponse {
	id := "unknown"
	if b != nil {
		id = fmt.Sprintf("capability %q binding %q", b.Capability, b.Name)
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i] // the stack goes to the log, not to the client
	}
	policy := h.opts.FailurePolicy
	if p, ok := h.opts.Policies[bindingCapability(b)]; ok {
		policy = p
	}
	h.opts.Log.Error(err, "admission binding failed", "binding", id, "failurePolicy", string(policy))
	if policy == admission.Ignore {
		return &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{
			fmt.Sprintf("vigil module %s: %s failed and was skipped (failurePolicy Ignore): %s", h.opts.Module, id, msg),
		}}
	}
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
		Message: fmt.Sprintf("vigil module %s: %s failed (failurePolicy Fail): %s", h.opts.Module, id, msg),
	}}
}

func bindingCapability(b *spec.Binding) string {
	if b == nil {
		return ""
	}
	return b.Capability
}
