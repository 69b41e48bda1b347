package admit

import (
	"strings"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// CapabilityPath is where a capability's bindings are served, and only its:
// registration points each capability's webhook here, so that a request two
// capabilities' webhooks match runs each binding once, not once per webhook.
// The shared paths, MutatePath and ValidatePath, serve every capability
// without an opt-out label, for configurations registered by a version that
// used them. A capability with an opt-out label is served on its own path
// alone: its webhooks skip what the label opts out, which the shared paths
// would not.
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
		if c, ok := strings.CutPrefix(path, prefix); ok && h.caps[c] {
			return action, c
		}
	}
	return "", ""
}

// servedOn reports whether binding b runs for a request that came on the
// path of capability: on a capability's path its bindings alone, on the
// shared paths ("") those of every capability without an opt-out label.
func (h *Handler) servedOn(b *spec.Binding, capability string) bool {
	switch capability {
	case everyCapability:
		return true
	case "":
		return !h.optOut[b.Capability]
	default:
		return b.Capability == capability
	}
}

// MutatePath is where the module's mutations are served.
func MutatePath(module string) string { return "/mutate/" + module }

// ValidatePath is where the module's validations are served.
func ValidatePath(module string) string { return "/validate/" + module }

// CanaryPath is where the registration's reachability canary is served.
func CanaryPath(module string) string { return "/canary/" + module }
