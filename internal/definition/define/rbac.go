package define

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Rules are the rules an author's RBAC declaration at site gives: one per
// namespace, or one cluster-wide. Wildcards and incomplete rules are
// mistakes.
func Rules(why, site string, rule rbacv1.PolicyRule, namespaces []string) ([]spec.Rule, error) {
	for _, list := range [][]string{rule.Verbs, rule.APIGroups, rule.Resources, rule.ResourceNames} {
		for _, v := range list {
			if strings.Contains(v, "*") {
				return nil, fmt.Errorf("RBAC(%q): %q is a wildcard: name the verbs, API groups and resources the handlers use", why, v)
			}
		}
	}
	if len(rule.Verbs) == 0 || len(rule.APIGroups) == 0 || len(rule.Resources) == 0 {
		return nil, fmt.Errorf("RBAC(%q): expected verbs, API groups (\"\" for the core group) and resources, got %+v", why, rule)
	}
	for _, ns := range namespaces {
		if problems := validation.IsDNS1123Label(ns); len(problems) > 0 {
			return nil, fmt.Errorf("RBAC(%q): namespace %q: %s", why, ns, strings.Join(problems, "; "))
		}
	}
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	var out []spec.Rule
	for _, ns := range namespaces {
		out = append(out, spec.Rule{Namespace: ns, PolicyRule: rule, Why: fmt.Sprintf("%s (declared at %s)", why, site)})
	}
	return out, nil
}

// RulesFor gives the n rules from first, declared by an RBAC whose For was
// called at site, only to the ServiceAccounts of the pods that run cs: the
// admission pod's for Admission, Gates and Phase(n) (the gate phases run in
// it), the watcher's for Watcher.
func (m *Module) RulesFor(site string, first, n int, cs []Container) {
	if len(cs) == 0 {
		m.Recordf(site, "RBAC(...).For(): expected the containers the rule is for: vigil.Admission, vigil.Watcher, vigil.Gates or vigil.Phase(n)")
		return
	}
	var roles, names []string
	for _, c := range cs {
		names = append(names, c.Name())
		role := spec.AdmissionContainer
		switch {
		case c.Role == spec.WatcherContainer:
			role = spec.WatcherContainer
		case c.Role == "" && c.Phase < 0:
			m.Recordf(site, "RBAC(...).For(%s): expected a phase of 0 or more", c)
			continue
		}
		if !slices.Contains(roles, role) {
			roles = append(roles, role)
		}
	}
	if len(roles) > 0 {
		m.SetRuleRoles(first, n, roles, "for the "+strings.Join(names, ", ")+" pods")
	}
}
