package manifests

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Ports of the admission container.
const (
	WebhookPort = 9443
	MetricsPort = 8080
)

// MetricsNamespace is the namespace whose pods may scrape the admission
// pods' metrics by default: where Prometheus runs in most clusters (UDS
// Core's and kube-prometheus' monitoring).
const MetricsNamespace = "monitoring"

// admissionNetworkPolicy admits to the admission pods only what they serve:
//   - the webhook port from anywhere: the API server must reach it, and its
//     address is not one a podSelector or namespaceSelector can name (it
//     runs on the host network, or outside the cluster altogether); the
//     chart narrows it to the control plane's CIDRs (controlPlaneCIDRs)
//     and other peers (webhookFrom) by values. The server's own limits
//     (internal/serving/webhook) keep the API server a connection there whoever
//     floods it;
//   - the metrics port from the MetricsNamespace's pods alone;
//   - nothing else.
func admissionNetworkPolicy(m *spec.Module, objMeta func(string, string, string) metav1.ObjectMeta) *networkingv1.NetworkPolicy {
	port := func(n int32) []networkingv1.NetworkPolicyPort {
		return []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(n))}}
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   tm("networking.k8s.io/v1", "NetworkPolicy"),
		ObjectMeta: objMeta(m.Name+"-admission", m.Namespace, "admission"),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: selectorOf(m.Name, "admission")},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{Ports: port(WebhookPort)},
				{Ports: port(MetricsPort), From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{corev1.LabelMetadataName: MetricsNamespace},
				}}}},
			},
		},
	}
}
