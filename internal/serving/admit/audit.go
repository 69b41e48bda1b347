package admit

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Skipped is a patch a capability's mutations would make to an object: one
// that got in while they did not run.
type Skipped struct {
	Capability string
	// Patch is the JSON patch they would make.
	Patch []byte
}

// AuditMutations runs, as a dry run, the mutations of the capabilities want
// accepts over req, as if it were created now, and returns the patches they
// would make. Nothing is changed; a mutation that fails counts as none.
func (h *Handler) AuditMutations(ctx context.Context, req *admissionv1.AdmissionRequest, want func(capability string) bool) []Skipped {
	dry := true
	req.DryRun = &dry
	var out []Skipped
	seen := map[string]bool{}
	for _, b := range h.mutate {
		if seen[b.Capability] || !want(b.Capability) {
			continue
		}
		seen[b.Capability] = true
		resp := h.auditReview(ctx, spec.Mutate, b.Capability, req, true)
		if resp.Allowed && len(resp.Patch) > 0 {
			out = append(out, Skipped{Capability: b.Capability, Patch: resp.Patch})
		}
	}
	return out
}

// Denial is a capability's validations' denial of an object, found by Audit.
type Denial struct {
	Capability, Message string
}

// Audit runs the validations over an object that already exists, as if it
// were created now, with the Store refusing writes: for the audit of what got
// in. Every validation judges as if enforced, whatever its capability's mode.
// It returns each capability's denial, in the order the capabilities' first
// validations were declared; none when the object passes.
func (h *Handler) Audit(ctx context.Context, req *admissionv1.AdmissionRequest) []Denial {
	dry := true
	req.DryRun = &dry
	var out []Denial
	seen := map[string]bool{}
	for _, b := range h.validate {
		if seen[b.Capability] {
			continue
		}
		seen[b.Capability] = true
		resp := h.auditReview(ctx, spec.Validate, b.Capability, req, true)
		if !resp.Allowed && resp.Result != nil {
			out = append(out, Denial{Capability: b.Capability, Message: resp.Result.Message})
		}
	}
	return out
}

// auditReview reviews one request (reviewRun.review) outside a webhook call,
// for the audit, under the handler's deadline: the answer comes by then,
// while a binding that ignores its context goes on.
func (h *Handler) auditReview(ctx context.Context, action spec.Action, capability string, req *admissionv1.AdmissionRequest, enforce bool) *admissionv1.AdmissionResponse {
	rv, run := h.prepare(action, capability, req, enforce)
	if len(run) == 0 {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	ctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	defer cancel()
	done := make(chan *admissionv1.AdmissionResponse, 1)
	go func() { done <- rv.review(ctx, action, run) }()
	select {
	case resp := <-done:
		return resp
	case <-ctx.Done():
		return h.timedOut(rv)
	}
}
