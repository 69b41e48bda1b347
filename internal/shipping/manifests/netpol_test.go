package manifests

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// The admission pods get a NetworkPolicy: the webhook port from anywhere
// (the API server), the metrics port from the monitoring namespace only,
// nothing else; none with NoNetworkPolicy.
func TestRenderShipsTheAdmissionNetworkPolicy(t *testing.T) {
	find := func(o Options) *networkingv1.NetworkPolicy {
		objs, err := Render(sample(), o)
		if err != nil {
			t.Fatal(err)
		}
		var found *networkingv1.NetworkPolicy
		for _, obj := range objs {
			if np, ok := obj.(*networkingv1.NetworkPolicy); ok {
				if found != nil {
					t.Fatalf("two NetworkPolicies: %s and %s", found.Name, np.Name)
				}
				found = np
			}
		}
		return found
	}
	np := find(Options{Image: "x/y:1"})
	if np == nil {
		t.Fatal("no NetworkPolicy rendered")
	}
	if np.Name != "uds-core-admission" || np.Namespace != "uds-system" {
		t.Errorf("NetworkPolicy %s/%s: want uds-system/uds-core-admission", np.Namespace, np.Name)
	}
	if got := np.Spec.PodSelector.MatchLabels; got["app.kubernetes.io/name"] != "uds-core" || got["app.kubernetes.io/component"] != "admission" || len(got) != 2 {
		t.Errorf("podSelector %v: want the admission pods' selector", got)
	}
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("policyTypes %v: want Ingress alone (egress stays open: the module calls the API server)", np.Spec.PolicyTypes)
	}
	rules := np.Spec.Ingress
	if len(rules) != 2 {
		t.Fatalf("%d ingress rules: want the webhook's and the metrics'", len(rules))
	}
	port := func(r networkingv1.NetworkPolicyIngressRule) int32 {
		if len(r.Ports) != 1 || r.Ports[0].Port == nil || *r.Ports[0].Protocol != corev1.ProtocolTCP {
			t.Fatalf("rule ports %v: want one TCP port", r.Ports)
		}
		return r.Ports[0].Port.IntVal
	}
	if port(rules[0]) != WebhookPort || len(rules[0].From) != 0 {
		t.Errorf("webhook rule %+v: want port %d from anywhere", rules[0], WebhookPort)
	}
	if port(rules[1]) != MetricsPort || len(rules[1].From) != 1 || rules[1].From[0].NamespaceSelector == nil ||
		rules[1].From[0].NamespaceSelector.MatchLabels[corev1.LabelMetadataName] != MetricsNamespace || rules[1].From[0].PodSelector != nil || rules[1].From[0].IPBlock != nil {
		t.Errorf("metrics rule %+v: want port %d from the namespace %s alone", rules[1], MetricsPort, MetricsNamespace)
	}
	if np := find(Options{Image: "x/y:1", NoNetworkPolicy: true}); np != nil {
		t.Errorf("NoNetworkPolicy rendered %s", np.Name)
	}
}
