package spec

import rbacv1 "k8s.io/api/rbac/v1"

// Rule is an RBAC rule and why the module needs it.
type Rule struct {
	// Role is the kind of pod whose ServiceAccount gets the rule: admission
	// (its gate init containers among it) or watcher; empty for every kind
	// the module runs.
	Role string `json:"role,omitempty"`
	// Namespace of a namespaced rule (a Role); empty for a ClusterRole.
	Namespace string `json:"namespace,omitempty"`
	rbacv1.PolicyRule
	// Why names the gate, binding or feature that needs the rule.
	Why string `json:"why"`
}
