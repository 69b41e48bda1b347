package admit

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// timedOut answers, by the failure policy, for a run whose binding did not
// finish in time, and counts it.
func (h *Handler) timedOut(rv *reviewRun) *admissionv1.AdmissionResponse {
	b := rv.current.Load()
	h.observe(b, "timeout", h.opts.Timeout)
	return h.failed(b, rv.req.Namespace, fmt.Errorf("did not finish within %s", h.opts.Timeout))
}

// recovered turns a binding's panic into its error; deferred by the
// binding's run.
func recovered(err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("panic: %v\n%s", p, firstFrames(debug.Stack(), 12))
	}
}

func firstFrames(stack []byte, lines int) string {
	parts := strings.SplitN(string(stack), "\n", lines+1)
	if len(parts) > lines {
		parts = parts[:lines]
	}
	return strings.Join(parts, "\n")
}

// failed answers for a binding that failed, by the failure policy of its
// capability, and logs the failure whole (a panic's stack with it).
func (h *Handler) failed(b *spec.Binding, ns string, err error) *admissionv1.AdmissionResponse {
	id, policy := bindingID(b), h.policyFor(b)
	if p, ok := spec.PolicyIn(bindingNamespacePolicies(b), ns); ok {
		policy = p
	}
	h.opts.Log.Error(err, "admission binding failed", "binding", id, "failurePolicy", string(policy))
	return failureAnswer(h.opts.Module, policy, id, err)
}

// policyFor is the failure policy that answers for binding b: its
// capability's (Options.Policies), else the module's.
func (h *Handler) policyFor(b *spec.Binding) admission.FailurePolicy {
	if p, ok := h.opts.Policies[bindingCapability(b)]; ok {
		return p
	}
	return h.opts.FailurePolicy
}

// failureAnswer is policy's answer to the failure err of the binding id
// names (bindingID), in module: Ignore allows with a warning, Fail denies;
// either message names the capability and binding and says what failed, up
// to the first line — a panic's stack goes to the log, not to the client.
func failureAnswer(module string, policy admission.FailurePolicy, id string, err error) *admissionv1.AdmissionResponse {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if policy == admission.Ignore {
		return &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{
			fmt.Sprintf("vigil module %s: %s failed and was skipped (failurePolicy Ignore): %s", module, id, msg),
		}}
	}
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
		Message: fmt.Sprintf("vigil module %s: %s failed (failurePolicy Fail): %s", module, id, msg),
	}}
}

// bindingID names a binding in failure messages.
func bindingID(b *spec.Binding) string {
	if b == nil {
		return "unknown"
	}
	return fmt.Sprintf("capability %q binding %q", b.Capability, b.Name)
}

// bindingNamespacePolicies are b's capability's failure policies by
// namespace; none for a failure before a binding ran.
func bindingNamespacePolicies(b *spec.Binding) []spec.NamespacePolicy {
	if b == nil {
		return nil
	}
	return b.NamespacePolicies
}

func bindingCapability(b *spec.Binding) string {
	if b == nil {
		return ""
	}
	return b.Capability
}
