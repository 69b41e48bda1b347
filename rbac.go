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
//
// The rule goes to the ServiceAccount of every kind of pod the module runs
// (admission, watcher), as one rule cannot tell whose code needs it; name the
// containers that need it with For, and each ServiceAccount gets only its
// own:
//
//	m.RBAC("the reconcile patches the tenant's status", rule).For(vigil.Watcher)
func (m *Module) RBAC(why string, rule rbacv1.PolicyRule, namespaces ...string) *RBACRule {
	site := define.Caller()
	rules, err := define.Rules(why, site, rule, namespaces)
	m.d.Check(site, err)
	return &RBACRule{m: m, first: m.d.AddRules(rules...), n: len(rules)}
}

// RBACRule is a rule RBAC declared.
type RBACRule struct {
	m        *Module
	first, n int
}

// For gives the rule only to the ServiceAccounts of the pods that run these
// containers: the admission pod's for Admission, Gates and Phase(n) (the
// gate phases are its init containers, and run as its ServiceAccount: name
// them apart for the why plan gives), the watcher's for Watcher. A pod the
// module does not run gets nothing.
func (r *RBACRule) For(cs ...Container) *RBACRule {
	r.m.d.RulesFor(define.Caller(), r.first, r.n, containers(cs))
	return r
}
