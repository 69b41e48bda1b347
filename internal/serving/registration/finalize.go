package registration

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// FinalizerStamps are what the API server writes for the module's Finalize
// bindings: each binding's finalizer, on the objects it selects, as they
// are created. The watcher puts it on only once it has seen the object, so
// an object deleted right after its create could be gone before; with the
// finalizer on from admission, the binding's handler runs for it. The
// selection is the binding's own, as CEL: its namespaces and filters. A
// binding with a filter that has no CEL form gets none, and keeps the
// window (the watcher releases a finalizer it finds on an object its
// binding no longer selects, so the two never hold an object for nothing).
// failurePolicy Ignore: where the policy cannot run, the watcher puts the
// finalizer on as before.
func FinalizerStamps(m *spec.Module) []Stamp {
	var out []Stamp
	for _, w := range m.Watches {
		if w.Role != spec.RoleFinalize {
			continue
		}
		conds, ok := finalizeConditions(&w)
		if !ok {
			continue
		}
		out = append(out, newStamp(spec.FinalizerPolicyName(m.Name, w.Finalizer),
			map[string]string{"app.kubernetes.io/name": m.Name, "app.kubernetes.io/managed-by": "vigil", "app.kubernetes.io/component": "watcher"},
			admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{w.GVK.Group}, APIVersions: []string{"*"}, Resources: []string{m.ResourceOf(w.GVK)}},
			}, conds,
			// finalizers is a set: applied, it is merged with the creator's
			// own.
			fmt.Sprintf(`Object{metadata: Object.metadata{finalizers: [%q]}}`, w.Finalizer),
			admissionregistrationv1.Ignore))
	}
	return out
}

// finalizeConditions are the match conditions that select what w does, as
// CEL: its namespaces, then each filter. ok is false when a filter has no
// CEL form.
func finalizeConditions(w *spec.Watch) (conds []admissionregistrationv1.MatchCondition, ok bool) {
	if ns := w.Select.Namespaces; len(ns) > 0 {
		quoted := make([]string, len(ns))
		for i, n := range ns {
			quoted[i] = fmt.Sprintf("%q", n)
		}
		conds = append(conds, admissionregistrationv1.MatchCondition{Name: "namespaces", Expression: "request.namespace in [" + strings.Join(quoted, ", ") + "]"})
	}
	for i, f := range w.Filters {
		if f.CEL == "" {
			return nil, false
		}
		conds = append(conds, admissionregistrationv1.MatchCondition{Name: fmt.Sprintf("filter-%d", i), Expression: f.CEL})
	}
	return conds, true
}
