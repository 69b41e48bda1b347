package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// UDS Core's network policy tests (test/vitest/pepr-policies/network.spec.ts,
// describe "network policies"), each subtest named after its it(...).
func TestNetworkPolicies(t *testing.T) {
	startUDSCore(t)

	t.Run("should prevent pods from using the host network namespace", func(t *testing.T) {
		const want = "Sharing the host namespaces is disallowed. The fields spec.hostNetwork, spec.hostIPC, and spec.hostPID must not be set to true."
		denied(t, "hostNetwork: true", apply(t, testPod("network-host-network", func(p *corev1.Pod) {
			p.Spec.HostNetwork = true
		})), want)
		denied(t, "hostIPC: true", apply(t, testPod("network-host-ipc", func(p *corev1.Pod) {
			p.Spec.HostIPC = true
		})), want)
		denied(t, "hostPID: true", apply(t, testPod("network-host-pid", func(p *corev1.Pod) {
			p.Spec.HostPID = true
		})), want)
	})

	t.Run("should prevent pods from using host ports", func(t *testing.T) {
		denied(t, "hostPort: 8080", apply(t, testPod("network-host-port", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
		})), "Host ports are not allowed.")
	})

	t.Run("should prevent ExternalName services", func(t *testing.T) {
		denied(t, "type: ExternalName", apply(t, netTestService("network-external-name", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.com"
		})), "ExternalName services are not allowed.")
	})

	t.Run("should prevent NodePort services", func(t *testing.T) {
		denied(t, "type: NodePort", apply(t, netTestService("network-node-port", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.Ports = []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80), NodePort: 30000}}
		})), "NodePort services are not allowed.")
	})
}

// netTestService is a Service of UDS Core's tests, in policy-tests,
// edited by with.
func netTestService(name string, with func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: PolicyTests}}
	if with != nil {
		with(s)
	}
	return s
}
