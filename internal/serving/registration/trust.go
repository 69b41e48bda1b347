package registration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/served"
	"github.com/vigilkit/vigil/provenance"
)

// The variables of a trusted namespace's guard and of the provenance guard
// that list who is allowed: JSON lists of strings, which CEL reads as list
// literals, so the chart can add the installer's identity to them.
const (
	AllowedUsersVar  = "allowedUsers"
	AllowedGroupsVar = "allowedGroups"
)

// TrustedGuardName names the policy and the binding guarding a trusted
// namespace.
func TrustedGuardName(module, namespace string) string {
	return spec.PolicyName(module, spec.TrustGuard, namespace)
}

// ProvenanceStampName names the MutatingAdmissionPolicy that stamps each
// Namespace with its creator, and its binding; ProvenanceGuardName the
// ValidatingAdmissionPolicy that guards the stamp, and its binding.
func ProvenanceStampName(module string) string {
	return spec.ProvenanceStampName(module)
}

// ProvenanceGuardName: see ProvenanceStampName.
func ProvenanceGuardName(module string) string {
	return spec.PolicyName(module, "namespace", spec.ProvenanceGuard)
}

// Allowed splits identities (usernames, and groups prefixed "group:") into
// users and groups, each as the JSON list the guards' variables hold.
func Allowed(identities []string) (users, groups string) {
	u, g := []string{}, []string{}
	for _, a := range identities {
		if name, ok := strings.CutPrefix(a, spec.GroupPrefix); ok {
			g = append(g, name)
		} else {
			u = append(u, a)
		}
	}
	ju, _ := json.Marshal(u)
	jg, _ := json.Marshal(g)
	return string(ju), string(jg)
}

func allowedVariables(identities []string) []admissionregistrationv1.Variable {
	users, groups := Allowed(identities)
	return []admissionregistrationv1.Variable{{Name: AllowedUsersVar, Expression: users}, {Name: AllowedGroupsVar, Expression: groups}}
}

// allowedNames names the allowed, as the variables hold them, for a denial.
const allowedNames = `(variables.` + AllowedUsersVar + ` + variables.` + AllowedGroupsVar + `.map(g, "` + spec.GroupPrefix + `" + g)).join(", ")`

const allowedByVariables = `request.userInfo.username in variables.` + AllowedUsersVar +
	` || (has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in variables.` + AllowedGroupsVar + `))`

// namespaceRules match Namespaces and their subresources (status,
// finalize), whose requests carry the whole Namespace.
func namespaceRules(ops ...admissionregistrationv1.OperationType) *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{
		NamespaceSelector: &metav1.LabelSelector{},
		ObjectSelector:    &metav1.LabelSelector{},
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: ops,
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces", "namespaces/*"},
					Scope: ptr.To(admissionregistrationv1.ClusterScope),
				},
			},
		}},
		MatchPolicy: ptr.To(admissionregistrationv1.Equivalent),
	}
}

// TrustedAllowed is who may manage a trusted namespace, or correct a
// namespace's provenance: the author's identities, or DefaultTrusted.
func TrustedAllowed(allowed []string) []string {
	if len(allowed) == 0 {
		return spec.DefaultTrusted
	}
	return allowed
}

// TrustedGuards are the guards of the module's trusted namespaces, in
// declaration order: each refuses creating and deleting its namespace, and
// changing its labels or annotations, to everyone but the allowed. It
// matches Namespaces only, and lets through at once every request for
// another namespace and every update that leaves labels and annotations as
// they were.
func TrustedGuards(m *spec.Module) []Guard {
	var out []Guard
	for _, t := range m.TrustedNamespaces {
		allowed := TrustedAllowed(t.Allowed)
		meta := func(obj, field string) string {
			return fmt.Sprintf(`(has(%[1]s.metadata.%[2]s) ? %[1]s.metadata.%[2]s : {})`, obj, field)
		}
		out = append(out, newGuard(m.Name, TrustedGuardName(m.Name, t.Name), admissionregistrationv1.Deny, admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: namespaceRules(admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete),
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name:       "the-trusted-namespace",
				Expression: fmt.Sprintf(`(request.operation == "DELETE" ? oldObject : object).metadata.name == %q`, t.Name),
			}, {
				Name: "creates-deletes-or-relabels-it",
				Expression: `request.operation != "UPDATE" || ` + meta("object", "labels") + ` != ` + meta("oldObject", "labels") +
					` || ` + meta("object", "annotations") + ` != ` + meta("oldObject", "annotations"),
			}},
			Variables: allowedVariables(allowed),
			Validations: []admissionregistrationv1.Validation{{
				Expression: allowedByVariables,
				Message: fmt.Sprintf("only %s may create or delete namespace %s, or change its labels or annotations: module %s trusts what it holds, and its install creates it",
					strings.Join(allowed, ", "), t.Name, m.Name),
				MessageExpression: fmt.Sprintf(`"only " + %s + %q`, allowedNames,
					fmt.Sprintf(" may create or delete namespace %s, or change its labels or annotations: module %s trusts what it holds, and its install creates it", t.Name, m.Name)),
				Reason: ptr.To(metav1.StatusReasonForbidden),
			}},
		}))
	}
	return out
}

// userGroups is the requester's groups as the stamp records them: a JSON
// list of strings, each group's backslashes and quotes escaped, so that a
// group such as `devs","system:masters` or `devs,system:masters` reads back
// as the one group it is (provenance.DecodeGroups).
const userGroups = `"[" + (has(request.userInfo.groups) ? request.userInfo.groups.map(g, '"' + g.replace('\\', '\\\\').replace('"', '\\"') + '"').join(",") : "") + "]"`

// stampOf is `="value"` when obj carries the annotation, "" when not.
func stampOf(obj, key string) string {
	return fmt.Sprintf(`(has(%[1]s.metadata.annotations) && %[2]q in %[1]s.metadata.annotations ? "=" + %[1]s.metadata.annotations[%[2]q] : "")`, obj, key)
}

// ProvenanceGuards are the guard of the namespace provenance stamp, when the
// module records it: it refuses changing or removing the stamp or a vouch
// (provenance.VouchedUnder) to everyone but the allowed, and on a CREATE a
// stamp that does not name the creator (what a creator would forge if the
// stamp's MutatingAdmissionPolicy did not run) or any vouch.
func ProvenanceGuards(m *spec.Module) []Guard {
	if m.Provenance == nil {
		return nil
	}
	allowed := TrustedAllowed(m.Provenance.Allowed)
	by, groups, vouch := stampOf("object", provenance.CreatedBy), stampOf("object", provenance.CreatedByGroups), stampOf("object", provenance.VouchedUnder)
	return []Guard{newGuard(m.Name, ProvenanceGuardName(m.Name), admissionregistrationv1.Deny, admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: namespaceRules(admissionregistrationv1.Create, admissionregistrationv1.Update),
		MatchConditions: []admissionregistrationv1.MatchCondition{{
			Name: "forges-changes-or-removes-the-stamp",
			Expression: `request.operation == "CREATE" ? ` +
				`(` + by + ` != "" && ` + by + ` != "=" + request.userInfo.username) || (` + groups + ` != "" && ` + groups + ` != "=" + ` + userGroups + `) || ` + vouch + ` != ""` +
				` : ` + by + ` != ` + stampOf("oldObject", provenance.CreatedBy) + ` || ` + groups + ` != ` + stampOf("oldObject", provenance.CreatedByGroups) +
				` || ` + vouch + ` != ` + stampOf("oldObject", provenance.VouchedUnder),
		}},
		Variables: allowedVariables(allowed),
		Validations: []admissionregistrationv1.Validation{{
			Expression: `request.operation == "UPDATE"`,
			Message: fmt.Sprintf("the annotations %s and %s record who created a namespace, and the API server writes them itself: create the namespace without them (and without %s, which vouches for a namespace that exists)",
				provenance.CreatedBy, provenance.CreatedByGroups, provenance.VouchedUnder),
			Reason: ptr.To(metav1.StatusReasonForbidden),
		}, {
			Expression: allowedByVariables,
			Message: fmt.Sprintf("only %s may change or remove the annotations %s, %s and %s: they record who created the namespace, or vouch for it (module %s)",
				strings.Join(allowed, ", "), provenance.CreatedBy, provenance.CreatedByGroups, provenance.VouchedUnder, m.Name),
			MessageExpression: fmt.Sprintf(`"only " + %s + %q`, allowedNames,
				fmt.Sprintf(" may change or remove the annotations %s, %s and %s: they record who created the namespace, or vouch for it (module %s)", provenance.CreatedBy, provenance.CreatedByGroups, provenance.VouchedUnder, m.Name)),
			Reason: ptr.To(metav1.StatusReasonForbidden),
		}},
	})}
}

// Stamp is a MutatingAdmissionPolicy and its binding.
type Stamp struct {
	Policy  *admissionregistrationv1.MutatingAdmissionPolicy
	Binding *admissionregistrationv1.MutatingAdmissionPolicyBinding
}

// Stamps are what the API server writes for the module itself: the
// namespace provenance stamp, when the module records it. It sets the
// annotations on every Namespace's CREATE, over whatever the creator wrote,
// with failurePolicy Fail.
func Stamps(m *spec.Module) []Stamp {
	if m.Provenance == nil {
		return nil
	}
	return []Stamp{newStamp(ProvenanceStampName(m.Name), map[string]string{"app.kubernetes.io/name": m.Name, "app.kubernetes.io/managed-by": "vigil"},
		admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces"},
				Scope: ptr.To(admissionregistrationv1.ClusterScope)},
		}, nil,
		fmt.Sprintf(`Object{metadata: Object.metadata{annotations: {%q: request.userInfo.username, %q: %s}}}`,
			provenance.CreatedBy, provenance.CreatedByGroups, userGroups),
		admissionregistrationv1.Fail)}
}

// newStamp is a MutatingAdmissionPolicy called name, and its binding, that
// applies the apply configuration expr to what rule and conds match, every
// namespace and object alike, with policy as its failure policy.
func newStamp(name string, labels map[string]string, rule admissionregistrationv1.RuleWithOperations, conds []admissionregistrationv1.MatchCondition,
	expr string, policy admissionregistrationv1.FailurePolicyType) Stamp {
	meta := metav1.ObjectMeta{Name: name, Labels: labels}
	return Stamp{
		Policy: &admissionregistrationv1.MutatingAdmissionPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingAdmissionPolicy"},
			ObjectMeta: meta,
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{
					NamespaceSelector: &metav1.LabelSelector{},
					ObjectSelector:    &metav1.LabelSelector{},
					ResourceRules:     []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: rule}},
					MatchPolicy:       ptr.To(admissionregistrationv1.Equivalent),
				},
				MatchConditions: conds,
				Mutations: []admissionregistrationv1.Mutation{{
					PatchType:          admissionregistrationv1.PatchTypeApplyConfiguration,
					ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: expr},
				}},
				FailurePolicy:      ptr.To(policy),
				ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			},
		},
		Binding: &admissionregistrationv1.MutatingAdmissionPolicyBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingAdmissionPolicyBinding"},
			ObjectMeta: *meta.DeepCopy(),
			Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name},
		},
	}
}

// TrustedNamespaceObjects are the Namespaces the module's install creates
// for its trusted namespaces, labelled with labels. Each outlives a Helm
// release (helm.sh/resource-policy: keep), with what the module trusts in
// it: its guard would refuse deleting it to an installer it does not allow.
func TrustedNamespaceObjects(m *spec.Module, labels map[string]string) []*corev1.Namespace {
	var out []*corev1.Namespace
	for _, t := range m.TrustedNamespaces {
		out = append(out, &corev1.Namespace{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: t.Name, Labels: labels,
				Annotations: map[string]string{"helm.sh/resource-policy": "keep"}},
		})
	}
	return out
}

// ensureStamps creates the module's Stamps, or brings them back in line, in
// the version of MutatingAdmissionPolicy the cluster serves; and its
// FinalizerStamps where the cluster serves one (elsewhere the watcher puts
// the finalizers on).
func ensureStamps(ctx context.Context, c kubernetes.Interface, cluster served.Cluster, m *spec.Module) error {
	stamps := Stamps(m)
	if cluster.Version(served.MutatingAdmissionPolicy) != "" {
		stamps = append(stamps, FinalizerStamps(m)...)
	}
	if len(stamps) == 0 {
		return nil
	}
	api, err := NewStampAPI(c, cluster, ProvenanceFeature(m))
	if err != nil {
		return err
	}
	for _, s := range stamps {
		if err := api.Apply(ctx, s.Policy, s.Binding, "vigil", nil); err != nil {
			return err
		}
	}
	return nil
}

// EnsureTrustedNamespaces creates the module's trusted namespaces that are
// missing, as its manifests would: for local runs (--bootstrap, vigil dev).
func EnsureTrustedNamespaces(ctx context.Context, c kubernetes.Interface, m *spec.Module, labels map[string]string) error {
	for _, ns := range TrustedNamespaceObjects(m, labels) {
		if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{FieldManager: "vigil"}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create trusted namespace %s: %w", ns.Name, err)
		}
	}
	return nil
}
