package vigil

import (
	"strings"

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
// pods that need it with For, and each ServiceAccount gets only its own:
//
//	m.RBAC("the reconcile patches the tenant's status", rule).For(vigil.WatcherPods)
func (m *Module) RBAC(why string, rule rbacv1.PolicyRule, namespaces ...string) *RBACRule {
	rules, err := define.Rules(why, callSite(1), rule, namespaces)
	m.check(1, err)
	return &RBACRule{m: m, first: m.d.AddRules(rules...), n: len(rules)}
}

// Pods names a kind of the module's pods, whose ServiceAccount an RBAC rule
// is for.
type Pods string

const (
	// GatePods are the init containers that run the gate phases — the
	// functions a Sample polls, gate callbacks, OnTimeout fallbacks. They run
	// in the admission pod, as its ServiceAccount: a rule for them is a rule
	// for AdmissionPods, named apart for why plan gives.
	GatePods Pods = "gates"
	// AdmissionPods serve the Mutate and Validate handlers.
	AdmissionPods Pods = "admission"
	// WatcherPods run the Watch, Reconcile and Finalize handlers and the
	// OnSchedule functions.
	WatcherPods Pods = "watcher"
)

// RBACRule is a rule RBAC declared.
type RBACRule struct {
	m        *Module
	first, n int
}

// For gives the rule only to the ServiceAccounts of pods: to the admission
// pod's for GatePods and AdmissionPods, to the watcher's for WatcherPods. A
// kind of pod the module does not run gets nothing.
func (r *RBACRule) For(pods ...Pods) *RBACRule {
	var roles, names []string
	seen := map[string]bool{}
	for _, p := range pods {
		names = append(names, string(p))
		role := ""
		switch p {
		case GatePods, AdmissionPods:
			role = "admission"
		case WatcherPods:
			role = "watcher"
		default:
			r.m.recordf(1, "RBAC(...).For(%q): expected vigil.GatePods, vigil.AdmissionPods or vigil.WatcherPods", string(p))
			continue
		}
		if !seen[role] {
			seen[role] = true
			roles = append(roles, role)
		}
	}
	if len(pods) == 0 {
		r.m.recordf(1, "RBAC(...).For(): expected the pods the rule is for: vigil.GatePods, vigil.AdmissionPods or vigil.WatcherPods")
		return r
	}
	if len(roles) > 0 {
		r.m.d.SetRuleRoles(r.first, r.n, roles, "for the "+strings.Join(names, ", ")+" pods")
	}
	return r
}
