package vigil

import (
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/vigilkit/vigil/internal/definition/define"
)

// RBAC declares a permission the module's handlers need beyond what vigil
// derives from the definition; `plan` prints why beside it. With namespaces
// it goes in a Role in each, else in the ClusterRole. Wildcards are refused.
// It goes to every pod's ServiceAccount unless For names the containers:
//
//	m.RBAC("the reconcile patches the tenant's status", rule).For(vigil.Watcher)
func (m *Module) RBAC(why string, rule rbacv1.PolicyRule, namespaces ...string) *RBACRule {
	first, n := m.d.DeclareRules(why, define.Caller(), rule, namespaces)
	return &RBACRule{m: m, first: first, n: n}
}

// RBACRule is a rule RBAC declared.
type RBACRule struct {
	m        *Module
	first, n int
}

// For gives the rule only to the ServiceAccounts of the pods running cs: the
// admission pod's for Admission, Gates and Phase(n), the watcher's for
// Watcher.
func (r *RBACRule) For(cs ...Container) *RBACRule {
	r.m.d.RulesFor(define.Caller(), r.first, r.n, containers(cs))
	return r
}
