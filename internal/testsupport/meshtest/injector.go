package meshtest

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Webhook is the injector's webhook, named as istiod names its own.
const Webhook = "sidecar-injector.istio.io"

// Injector is a mutating webhook configuration named name as istiod's
// sidecar injector registers it: Webhook, failing closed, on the Pod
// creates of the namespaces labelled istio-injection=enabled, served by
// Service istiod in namespace ns at /inject and trusted by caBundle.
func Injector(name, ns string, caBundle []byte) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: Webhook,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: caBundle,
				Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "istiod", Path: ptr.To("/inject")}},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"istio-injection": "enabled"}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}
