package registration

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Checks are the module's checks (spec.Check) as the API server evaluates
// them: each a ValidatingAdmissionPolicy and its binding, in declaration
// order, as the module's manifests ship them. A check matches what its
// webhook would — the capability's namespaces and none of spec.ExcludedNamespaces,
// no object or namespace opted out, no cluster plumbing, none of the objects
// the module's gates wait for — and its binding's actions follow the
// capability's mode.
func Checks(m *spec.Module) []Guard {
	var out []Guard
	excluded := m.ExclusionPolicy()
	for _, c := range m.Checks {
		kind := c.ResourceKind()
		ops := make([]admissionregistrationv1.OperationType, len(c.Operations))
		for i, op := range c.Operations {
			ops[i] = admissionregistrationv1.OperationType(op)
		}
		action := admissionregistrationv1.Deny
		switch c.Mode {
		case spec.Warn:
			action = admissionregistrationv1.Warn
		case spec.Audit:
			action = admissionregistrationv1.Audit
		}
		rules := []admissionregistrationv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: ops,
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{kind.Group}, APIVersions: []string{kind.Version}, Resources: []string{c.Resource()}},
			},
		}}
		conds := excluded.MatchConditions()
		if c.StatusMetadata() {
			// The status writes that change labels or annotations, as a
			// binding's webhook is sent them (spec.Check.StatusMetadata).
			rules = append(rules, admissionregistrationv1.NamedRuleWithOperations{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{kind.Group}, APIVersions: []string{kind.Version},
						Resources: []string{c.Resource() + "/" + spec.StatusSubresource}},
				},
			})
			conds = append(conds, admissionregistrationv1.MatchCondition{Name: "status-changes-metadata",
				Expression: spec.NotStatus + " || " + spec.MetadataChanged})
		}
		out = append(out, newGuard(m.Name, spec.CheckName(m.Name, c.Capability, c.Name), action, admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: excluded.For(c.Namespaces, c.OptOut).WithOptIn(c.OptIn).NamespaceSelector(),
				ObjectSelector:    excluded.For(c.Namespaces, c.OptOut).ObjectSelector(),
				ResourceRules:     rules,
				MatchPolicy:       ptr.To(admissionregistrationv1.Exact),
			},
			MatchConditions: conds,
			Validations: []admissionregistrationv1.Validation{{
				Expression: c.Expression,
				Message:    c.Message,
				Reason:     ptr.To(metav1.StatusReasonForbidden),
			}},
		}))
	}
	return out
}

// Policies are what the API server evaluates for the module itself: the
// opt-out guards (Guards), the checks (Checks), the guards of the trusted
// namespaces (TrustedGuards) and of the namespace provenance
// (ProvenanceGuards). Stamps are the mutating ones.
func Policies(m *spec.Module) []Guard {
	out := append(Guards(m), Checks(m)...)
	out = append(out, TrustedGuards(m)...)
	return append(out, ProvenanceGuards(m)...)
}
