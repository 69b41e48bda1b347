package admit

import (
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/events"
)

// effect is what a binding's verdict does to its request, under its
// capability's mode.
type effect uint8

const (
	// effectPass: the verdict allows; the next binding runs.
	effectPass effect = iota
	// effectDeny: a denial, enforced; it answers the request.
	effectDeny
	// effectWarn: a denial in Warn mode; the request is allowed and the
	// denial becomes a warning to the client.
	effectWarn
	// effectRecord: a denial in Audit mode; the request is allowed and the
	// denial becomes a finding in the log, the client told nothing.
	effectRecord
)

// effectOf maps a verdict (allowed or not) to its effect under mode. Enforce
// — and no mode at all — enforces a denial, as enforce (the audit's, which
// judges every validation as enforced) does whatever the mode. A mutation's
// verdict always allows: modes never change a mutation.
func effectOf(mode spec.Mode, enforce, allowed bool) effect {
	switch {
	case allowed:
		return effectPass
	case enforce:
		return effectDeny
	case mode == spec.Warn:
		return effectWarn
	case mode == spec.Audit:
		return effectRecord
	default:
		return effectDeny
	}
}

// denial is the answer to an enforced denial, with the warnings the
// bindings before it gave.
func denial(v admission.Verdict, warnings []string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: false, Warnings: warnings, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: v.Code(), Message: v.Message(), Reason: reasonFor(v.Code()),
	}}
}

// joinVerdicts is one denial of several: the first's code, their messages
// joined with "; ", as Pepr joins them.
func joinVerdicts(vs []admission.Verdict) admission.Verdict {
	if len(vs) == 1 {
		return vs[0]
	}
	msgs := make([]string, len(vs))
	for i, v := range vs {
		msgs[i] = v.Message()
	}
	return admission.DenyCode(vs[0].Code(), strings.Join(msgs, "; "))
}

// unenforced answers a denial of a binding whose capability is in Warn or
// Audit mode: the request is allowed, and the denial becomes a warning to
// the client (Warn) or a finding in the log (Audit); both are counted.
func (rv *reviewRun) unenforced(b *spec.Binding, v admission.Verdict, warnings []string) []string {
	rv.h.unenforcedDenial(b)
	if b.Mode == spec.Warn {
		return append(warnings, unenforcedWarning(rv.h.opts.Module, b, v))
	}
	r := rv.req
	events.Info(rv.h.opts.Log, events.AuditFinding, "a validation denied a request that its capability only audits: allowed, recorded as a finding",
		"capability", b.Capability, "binding", b.Name, "mode", string(b.Mode), "operation", string(r.Operation),
		"kind", r.Kind.Kind, "namespace", r.Namespace, "name", r.Name, "user", r.UserInfo.Username, "dryRun", rv.dryRun,
		"violation", v.Message())
	return warnings
}

// unenforcedWarning is the warning a denial in Warn mode becomes, naming the
// module, capability and binding.
func unenforcedWarning(module string, b *spec.Binding, v admission.Verdict) string {
	return fmt.Sprintf("vigil module %s: capability %q binding %q would deny this (mode Warn, not enforced): %s", module, b.Capability, b.Name, v.Message())
}

// reasonFor is the status reason of a denial's HTTP status code.
func reasonFor(code int32) metav1.StatusReason {
	switch code {
	case http.StatusForbidden:
		return metav1.StatusReasonForbidden
	case http.StatusBadRequest:
		return metav1.StatusReasonBadRequest
	case http.StatusUnprocessableEntity:
		return metav1.StatusReasonInvalid
	case http.StatusConflict:
		return metav1.StatusReasonConflict
	default:
		return ""
	}
}
