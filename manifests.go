package vigil

import (
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vigilkit/vigil/internal/spec"
)

// RBAC declares a permission the module's handlers need beyond what vigil
// derives from the definition (gates, bindings, listers, the Store, leader
// election and registration are derived): a status subresource a Reconcile
// patches, objects a handler creates. why is printed beside the rule by
// `plan`. With namespaces the rule goes in a Role in each; without, in the
// module's ClusterRole. Wildcards are refused: name verbs, groups and
// resources.
func (m *Module) RBAC(why string, rule rbacv1.PolicyRule, namespaces ...string) {
	site := callSite(1)
	for _, list := range [][]string{rule.Verbs, rule.APIGroups, rule.Resources, rule.ResourceNames} {
		for _, v := range list {
			if strings.Contains(v, "*") {
				m.recordf(1, "RBAC(%q): %q is a wildcard: name the verbs, API groups and resources the handlers use", why, v)
				return
			}
		}
	}
	if len(rule.Verbs) == 0 || len(rule.APIGroups) == 0 || len(rule.Resources) == 0 {
		m.recordf(1, "RBAC(%q): expected verbs, API groups (\"\" for the core group) and resources, got %+v", why, rule)
		return
	}
	for _, ns := range namespaces {
		if problems := validation.IsDNS1123Label(ns); len(problems) > 0 {
			m.recordf(1, "RBAC(%q): namespace %q: %s", why, ns, strings.Join(problems, "; "))
			return
		}
	}
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ns := range namespaces {
		m.rules = append(m.rules, spec.Rule{Namespace: ns, PolicyRule: rule, Why: fmt.Sprintf("%s (declared at %s)", why, site)})
	}
}
