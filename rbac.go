package vigil

import (
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/vigilkit/vigil/internal/define"
)

// RBAC declares a permission the module's handlers need beyond what vigil
// derives from the definition (gates, bindings, listers, the Store, leader
// election and registration are derived): a status subresource a Reconcile
// patches, objects a handler creates. why is printed beside the rule by
// `plan`. With namespaces the rule goes in a Role in each; without, in the
// module's ClusterRole. Wildcards are refused: name verbs, groups and
// resources.
func (m *Module) RBAC(why string, rule rbacv1.PolicyRule, namespaces ...string) {
	rules, err := define.Rules(why, callSite(1), rule, namespaces)
	m.check(1, err)
	m.d.AddRules(rules...)
}
