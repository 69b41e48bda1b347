package admit

import (
	"strings"

	"github.com/vigilkit/vigil/internal/spec"
)

// CapabilityPath is where a capability with an opt-out label is served, on
// its own: its webhooks skip what the label opts out, which the other
// capabilities' webhooks, sharing MutatePath and ValidatePath, do not — so
// its bindings must run only when its own webhooks call.
func CapabilityPath(action spec.Action, module, capability string) string {
	return "/" + string(action) + "/" + module + "/" + capability
}

// everyCapability makes review run the bindings of every capability: for the
// audit, which no webhook calls.
const everyCapability = "\x00every"

// ownPath is the action and capability of a CapabilityPath this module
// serves; "" and "" for any other path.
func (h *Handler) ownPath(path string) (spec.Action, string) {
	for _, action := range []spec.Action{spec.Mutate, spec.Validate} {
		prefix := "/" + string(action) + "/" + h.opts.Module + "/"
		if c, ok := strings.CutPrefix(path, prefix); ok && h.own[c] {
			return action, c
		}
	}
	return "", ""
}

// servedOn reports whether binding b runs for a request that came on the
// path of capability: a capability served on its own path only there, every
// other one only on the shared paths ("").
func (h *Handler) servedOn(b *spec.Binding, capability string) bool {
	switch capability {
	case everyCapability:
		return true
	case "":
		return !h.own[b.Capability]
	default:
		return b.Capability == capability
	}
}
