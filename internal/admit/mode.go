package admit

import (
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/events"
	"github.com/vigilkit/vigil/internal/spec"
)

// unenforced answers a denial of a binding whose capability is in Warn or
// Audit mode: the request is allowed, and the denial becomes a warning to
// the client (Warn) or a finding in the log (Audit); both are counted.
func (rv *reviewRun) unenforced(b *spec.Binding, v admission.Verdict, warnings []string) []string {
	if rv.h.opts.Metrics != nil {
		rv.h.opts.Metrics.unenforcedDenial(b)
	}
	if b.Mode == spec.Warn {
		return append(warnings, fmt.Sprintf("vigil module %s: capability %q binding %q would deny this (mode Warn, not enforced): %s", rv.h.opts.Module, b.Capability, b.Name, v.Message()))
	}
	r := rv.req
	events.Info(rv.h.opts.Log, events.AuditFinding, "a validation denied a request that its capability only audits: allowed, recorded as a finding",
		"capability", b.Capability, "binding", b.Name, "mode", string(b.Mode), "operation", string(r.Operation),
		"kind", r.Kind.Kind, "namespace", r.Namespace, "name", r.Name, "user", r.UserInfo.Username, "dryRun", rv.dryRun,
		"violation", v.Message())
	return warnings
}

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
