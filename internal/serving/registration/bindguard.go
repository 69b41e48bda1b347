package registration

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// BindingGuard is the guard of the RoleBindings a module's roles create
// themselves: a role whose rights in a namespace other than the module's
// ship as a ClusterRole (spec.NamespaceRoleName) binds it there once the
// namespace exists. RBAC cannot narrow create to a namespace that does not
// exist yet, nor a binding's subject: this policy does. A request of one of
// the serviceAccounts (in the module's namespace) to create or change a
// RoleBinding is refused unless it is the account's own binding
// (spec.BindingName), of the ClusterRole of that very namespace, to the
// account alone. And the name of a role's binding is reserved outside the
// module's namespace: anyone's RoleBinding under it must be that binding, so
// that a namespace's admin cannot take the name first with another and keep
// the role refused there (the role replaces one made before this policy
// held; see rolebind.Binder).
func BindingGuard(m *spec.Module, serviceAccounts []string) Guard {
	var users, names, own, shaped []string
	for _, sa := range serviceAccounts {
		user := fmt.Sprintf("system:serviceaccount:%s:%s", m.Namespace, sa)
		users = append(users, fmt.Sprintf("%q", user))
		names = append(names, fmt.Sprintf("%q", spec.BindingName(sa)))
		shape := fmt.Sprintf(`(object.metadata.name == %q && object.roleRef.apiGroup == "rbac.authorization.k8s.io" && object.roleRef.kind == "ClusterRole" && object.roleRef.name == %q + object.metadata.namespace && size(object.subjects) == 1 && object.subjects[0].kind == "ServiceAccount" && object.subjects[0].name == %q && object.subjects[0].namespace == %q)`,
			spec.BindingName(sa), spec.NamespaceRoleName(sa, ""), sa, m.Namespace)
		own = append(own, fmt.Sprintf("(request.userInfo.username == %q && %s)", user, shape))
		shaped = append(shaped, shape)
	}
	byRoles := fmt.Sprintf("request.userInfo.username in [%s]", strings.Join(users, ", "))
	reserved := fmt.Sprintf("object.metadata.namespace != %q && object.metadata.name in [%s]", m.Namespace, strings.Join(names, ", "))
	return newGuard(m.Name, spec.BindingGuardName(m.Name), admissionregistrationv1.Deny, admissionregistrationv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: createsAndUpdates(admissionregistrationv1.Rule{
			APIGroups: []string{"rbac.authorization.k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"rolebindings"},
			Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		}),
		MatchConditions: []admissionregistrationv1.MatchCondition{{
			Name:       "by-the-modules-roles-or-under-their-names",
			Expression: byRoles + " || (" + reserved + ")",
		}},
		Validations: []admissionregistrationv1.Validation{{
			Expression: "!(" + byRoles + ") || " + strings.Join(own, " || "),
			Message: fmt.Sprintf("module %s's roles may create only their own RoleBinding (%s), of the ClusterRole of the namespace it is in (%s<namespace>), to themselves",
				m.Name, spec.BindingName("<ServiceAccount>"), spec.NamespaceRoleName("<ServiceAccount>", "")),
			Reason: ptr.To(metav1.StatusReasonForbidden),
		}, {
			Expression: "!(" + reserved + ") || " + strings.Join(shaped, " || "),
			Message: fmt.Sprintf("the RoleBinding names %s are module %s's roles' own: under such a name only the role's binding, of the ClusterRole of the namespace it is in (%s<namespace>), to the role's ServiceAccount, may be made; choose another name",
				strings.Join(names, ", "), m.Name, spec.NamespaceRoleName("<ServiceAccount>", "")),
			Reason: ptr.To(metav1.StatusReasonForbidden),
		}},
	})
}
