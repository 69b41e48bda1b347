package main

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/vigilkit/vigil"
)

// declareNetworking declares UDS Core's networking policies (its
// policies/networking.ts), in its order.
func (p *policies) declareNetworking() {
	// Host namespaces: hostNetwork, hostIPC and hostPID are not set to true.
	p.pod(DisallowHostNamespaces, nil, func(r *vigil.Request[*corev1.Pod]) string {
		if s := r.Object.Spec; s.HostNetwork || s.HostIPC || s.HostPID {
			return "Sharing the host namespaces is disallowed. The fields spec.hostNetwork, spec.hostIPC, and spec.hostPID must not be set to true."
		}
		return ""
	})

	// Host ports: no container's port sets one.
	p.pod(RestrictHostPorts, nil, func(r *vigil.Request[*corev1.Pod]) string {
		if netHostPorts(r.Object) {
			return "Host ports are not allowed."
		}
		return ""
	})

	// ExternalName Services are denied.
	p.service(RestrictExternalNames, func(r *vigil.Request[*corev1.Service]) string {
		if r.Object.Spec.Type == corev1.ServiceTypeExternalName {
			return "ExternalName services are not allowed."
		}
		return ""
	})

	// NodePort Services are denied.
	p.service(DisallowNodePortServices, func(r *vigil.Request[*corev1.Service]) string {
		if r.Object.Spec.Type == corev1.ServiceTypeNodePort {
			return "NodePort services are not allowed."
		}
		return ""
	})
}

// netHostPorts reports whether a container, init container or ephemeral
// container of the Pod has a port with a hostPort (0 counts as none, as
// UDS Core's truthiness check reads it).
func netHostPorts(pod *corev1.Pod) bool {
	for _, c := range containers(pod) {
		for _, port := range c.Ports {
			if port.HostPort != 0 {
				return true
			}
		}
	}
	return false
}
