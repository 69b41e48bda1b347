package deadlock

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// mustPass says why object o is admitted only once module m serves: the
// fail-closed webhooks of m it must pass on CREATE; "" when there are none.
func mustPass(m *Module, o spec.Object) string {
	var hooks []string
	for _, h := range m.FailClosed {
		if admits(m, &h, o) {
			hooks = append(hooks, fmt.Sprintf("webhook %s%s on CREATE", h.Name, at(h.Site)))
		}
	}
	if len(hooks) == 0 {
		return ""
	}
	return fmt.Sprintf("%s is admitted only once %s serves: it must pass %s's fail-closed %s", describe(o), m.Name, m.Name, strings.Join(hooks, " and "))
}

// admits says whether creating o must pass module n's fail-closed webhook h,
// as package registration installs it: its rules, then the module's
// exclusion policy (spec.ExclusionPolicy), which the webhook's selectors and
// match conditions render. What the analysis cannot know of o — its labels,
// its namespace's, the namespace itself — it takes as matching.
func admits(n *Module, h *Webhook, o spec.Object) bool {
	if o.Kind == "" || !slices.ContainsFunc(h.Operations, func(op string) bool { return strings.EqualFold(op, "CREATE") || op == "*" }) {
		return false
	}
	if (h.Group != o.Group && h.Group != "*") || (h.Kind != o.Kind && h.Kind != "*") {
		return false
	}
	p := n.exclusion().For(h.Namespaces, "")
	p.Namespaces = append(slices.Clone(p.Namespaces), h.Except...)
	return p.Admits(request(o))
}

// exclusion is n's exclusion policy: the objects its gates wait for, each
// exactly, as spec.Module.Exclusions has them.
func (n *Module) exclusion() spec.ExclusionPolicy {
	var objects []spec.Exclusion
	for _, gt := range n.Gates {
		if e, ok := spec.ExclusionOf(gt.Waits); ok && !slices.ContainsFunc(objects, e.Same) {
			objects = append(objects, e)
		}
	}
	return spec.NewExclusionPolicy(n.Namespace, n.Ignored, objects)
}

// request is the admission request creating o makes: a Namespace's names
// itself as its namespace.
func request(o spec.Object) spec.AdmissionRequest {
	r := spec.AdmissionRequest{Group: o.Group, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}
	if o.Group == "" && o.Kind == "Namespace" {
		r.Namespace = o.Name
	}
	return r
}
