package registration

import (
	"context"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/served"
)

// Guard is a ValidatingAdmissionPolicy and its binding, which the API server
// evaluates itself, so it holds while the module is down: a capability's
// check (see Checks), or the guard of its opt-out label. A guard refuses
// the label to everyone its author did not allow; it has no selectors, so
// the label it guards cannot switch it off. It matches every create and
// update of every resource and subresource, and its match condition lets
// through at once every request that leaves the label as it was.
type Guard struct {
	Policy  *admissionregistrationv1.ValidatingAdmissionPolicy
	Binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
}

// Guards are the guards of a module's capabilities that have an opt-out
// label, in the capabilities' order, as the module's manifests ship them.
func Guards(m *spec.Module) []Guard {
	var out []Guard
	for _, c := range m.Capabilities {
		switch {
		case c.OptOut != nil:
			out = append(out, guard(m.Name, spec.GuardName(m.Name, c.Name), c.OptOut,
				fmt.Sprintf("it opts namespaces and objects out of module %s's capability %s", m.Name, c.Name)))
		case c.OptIn != nil:
			out = append(out, guard(m.Name, spec.OptInGuardName(m.Name, c.Name), c.OptIn,
				fmt.Sprintf("it opts namespaces into module %s's capability %s", m.Name, c.Name)))
		}
	}
	return out
}

// guard is the guard name of the label o: what says what the label does.
func guard(module, name string, o *spec.OptOut, what string) Guard {
	key := fmt.Sprintf("%q", o.Label)
	// label is `="value"` when obj carries the label, "" when it does not:
	// absent and empty differ.
	label := func(obj string) string {
		return fmt.Sprintf(`(%[1]s != null && has(%[1]s.metadata) && has(%[1]s.metadata.labels) && %[2]s in %[1]s.metadata.labels ? "=" + %[1]s.metadata.labels[%[2]s] : "")`, obj, key)
	}
	var users, groups []string
	for _, a := range o.Allowed {
		if g, ok := strings.CutPrefix(a, spec.GroupPrefix); ok {
			groups = append(groups, fmt.Sprintf("%q", g))
		} else {
			users = append(users, fmt.Sprintf("%q", a))
		}
	}
	allowed := fmt.Sprintf(`request.userInfo.username in [%s] || (has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in [%s]))`,
		strings.Join(users, ", "), strings.Join(groups, ", "))
	return newGuard(module, name, admissionregistrationv1.Deny, admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: createsAndUpdates(admissionregistrationv1.Rule{
			APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"},
			Scope: ptr.To(admissionregistrationv1.AllScopes),
		}),
		MatchConditions: []admissionregistrationv1.MatchCondition{{
			Name:       "sets-changes-or-removes-the-label",
			Expression: label("object") + " != " + label("oldObject"),
		}},
		Validations: []admissionregistrationv1.Validation{{
			Expression: allowed,
			Message: fmt.Sprintf("only %s may set, change or remove the label %s: %s",
				strings.Join(o.Allowed, ", "), o.Label, what),
			Reason: ptr.To(metav1.StatusReasonForbidden),
		}},
	})
}

// createsAndUpdates matches every create and update of what rule names, with
// no selector, so that no label can switch a guard off.
func createsAndUpdates(rule admissionregistrationv1.Rule) *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{
		NamespaceSelector: &metav1.LabelSelector{},
		ObjectSelector:    &metav1.LabelSelector{},
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       rule,
			},
		}},
		MatchPolicy: ptr.To(admissionregistrationv1.Equivalent),
	}
}

// newGuard is the ValidatingAdmissionPolicy name of the module with spec,
// failurePolicy Fail, and its binding with action.
func newGuard(module, name string, action admissionregistrationv1.ValidationAction, spec admissionregistrationv1.ValidatingAdmissionPolicySpec) Guard {
	meta := metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/name": module, "app.kubernetes.io/managed-by": "vigil"}}
	spec.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	return Guard{
		Policy: &admissionregistrationv1.ValidatingAdmissionPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
			ObjectMeta: meta,
			Spec:       spec,
		},
		Binding: &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
			ObjectMeta: *meta.DeepCopy(),
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        name,
				ValidationActions: []admissionregistrationv1.ValidationAction{action},
			},
		},
	}
}

// EnsurePolicies creates the module's trusted namespaces when missing, and
// its Stamps, guards and checks (Policies), or
// brings them back in line with its definition: what a module's manifests
// install, for local runs (the admission role's --bootstrap). A module never
// needs rights to them.
func EnsurePolicies(ctx context.Context, c kubernetes.Interface, cluster served.Cluster, m *spec.Module) error {
	// A trusted namespace first, as the manifests create it before its
	// guard: the identity that bootstraps need not be allowed.
	if err := EnsureTrustedNamespaces(ctx, c, m, map[string]string{"app.kubernetes.io/name": m.Name, "app.kubernetes.io/managed-by": "vigil"}); err != nil {
		return err
	}
	api := c.AdmissionregistrationV1()
	for _, g := range Policies(m) {
		p, b := g.Policy, g.Binding
		if cur, err := api.ValidatingAdmissionPolicies().Get(ctx, p.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			_, err = api.ValidatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{FieldManager: "vigil"})
			if err != nil {
				return fmt.Errorf("create ValidatingAdmissionPolicy %s: %w", p.Name, err)
			}
		} else if err != nil {
			return fmt.Errorf("get ValidatingAdmissionPolicy %s: %w", p.Name, err)
		} else {
			p.ResourceVersion = cur.ResourceVersion
			if _, err := api.ValidatingAdmissionPolicies().Update(ctx, p, metav1.UpdateOptions{FieldManager: "vigil"}); err != nil {
				return fmt.Errorf("update ValidatingAdmissionPolicy %s: %w", p.Name, err)
			}
		}
		if cur, err := api.ValidatingAdmissionPolicyBindings().Get(ctx, b.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			_, err = api.ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{FieldManager: "vigil"})
			if err != nil {
				return fmt.Errorf("create ValidatingAdmissionPolicyBinding %s: %w", b.Name, err)
			}
		} else if err != nil {
			return fmt.Errorf("get ValidatingAdmissionPolicyBinding %s: %w", b.Name, err)
		} else {
			b.ResourceVersion = cur.ResourceVersion
			if _, err := api.ValidatingAdmissionPolicyBindings().Update(ctx, b, metav1.UpdateOptions{FieldManager: "vigil"}); err != nil {
				return fmt.Errorf("update ValidatingAdmissionPolicyBinding %s: %w", b.Name, err)
			}
		}
	}
	// The stamps after their guards: a stamp in force is believed
	// (provenance.Settle after its creation), and its guard must hold by
	// then.
	return ensureStamps(ctx, c, cluster, m)
}
