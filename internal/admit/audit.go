package admit

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/vigilkit/vigil/internal/spec"
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
		resp := h.review(ctx, spec.Mutate, b.Capability, req, true)
		if resp.Allowed && len(resp.Patch) > 0 {
			out = append(out, Skipped{Capability: b.Capability, Patch: resp.Patch})
		}
	}
	return out
}
