package registration

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Bootstrap returns the module's two webhook configurations as its manifests
// ship them: empty, named after the module.
func Bootstrap(module string) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	meta := metav1.ObjectMeta{Name: module, Labels: map[string]string{"app.kubernetes.io/name": module, "app.kubernetes.io/managed-by": "vigil"}}
	return &admissionregistrationv1.MutatingWebhookConfiguration{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
			ObjectMeta: meta,
		}, &admissionregistrationv1.ValidatingWebhookConfiguration{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
			ObjectMeta: *meta.DeepCopy(),
		}
}

// Rule is the RBAC rule registration needs: get and patch on exactly the
// module's two configurations — never create, so the module cannot register
// anything else.
func Rule(module string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{
		APIGroups:     []string{admissionregistrationv1.GroupName},
		Resources:     []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"},
		Verbs:         []string{"get", "patch"},
		ResourceNames: []string{spec.ConfigurationName(module)},
	}
}

// CanaryRule is the namespaced rule the reachability canary needs in the
// module's own namespace: create on ConfigMaps, used only with dryRun=All, so
// nothing is ever written. (create cannot be narrowed by resourceNames.)
func CanaryRule() rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}}
}
