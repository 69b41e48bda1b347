package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/vigiltest"
)

// UDS Core's security policy tests (test/vitest/pepr-policies/security.spec.ts,
// describe "security policies"), each subtest named after its it(...).
func TestSecurityPolicies(t *testing.T) {
	startUDSCore(t)

	t.Run("should not allow privilege escalation", func(t *testing.T) {
		const want = "Privilege escalation is disallowed. Authorized: [allowPrivilegeEscalation = false | privileged = false]"
		denied(t, "allowPrivilegeEscalation: true", apply(t, testPod("security-privilege-escalation", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true)}
		})), want)
		denied(t, "privileged: true", apply(t, testPod("security-privileged", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		})), want)
	})

	t.Run("should not allow root users", func(t *testing.T) {
		const want = "Unauthorized container securityContext. Containers must not run as root or have root-level supplemental groups. Authorized: [runAsNonRoot = true | runAsUser > 0 | supplementalGroups must not include 0]"
		denied(t, "runAsUser: 0", apply(t, testPod("security-run-as-user", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}
		})), want)
		denied(t, "runAsNonRoot: false", apply(t, testPod("security-run-as-non-root", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsNonRoot: ptr.To(false)}
		})), want)
		denied(t, "runAsNonRoot: false, runAsUser: 0", apply(t, testPod("security-run-as-non-root-and-user", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsNonRoot: ptr.To(false), RunAsUser: ptr.To[int64](0)}
		})), want)
	})

	// Skipped in UDS Core (its test clusters lack the ProcMountType feature
	// gate), where it expects "Authorized: [undefined | Default]"; UDS
	// Core's securityContextMessage leaves undefined out, as here.
	t.Run("should restrict procMount to DefaultProcMount", func(t *testing.T) {
		denied(t, "procMount: Unmasked", apply(t, testPod("security-proc-mount", func(p *corev1.Pod) {
			p.Spec.HostUsers = ptr.To(false)
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}
		})), "Unauthorized procMount type. Authorized: [Default]")
	})

	t.Run("should restrict seccomp profiles to runtime/localhost", func(t *testing.T) {
		const want = "seccomp profile type. Authorized: [RuntimeDefault | Localhost]"
		denied(t, "the Pod's seccompProfile Unconfined", apply(t, testPod("security-seccomp-profile-pod", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		})), want)
		denied(t, "a container's seccompProfile Unconfined", apply(t, testPod("security-seccomp-profile", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		})), want)
	})

	t.Run("should disallow seLinuxOptions", func(t *testing.T) {
		const want = "SELinux Options. Authorized: [user: undefined | role: undefined]"
		bad := &corev1.SELinuxOptions{User: "bad", Role: "bad"}
		denied(t, "the Pod's seLinuxOptions user and role", apply(t, testPod("security-selinux-pod", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SELinuxOptions: bad}
		})), want)
		denied(t, "a container's seLinuxOptions user and role", apply(t, testPod("security-selinux-pod", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SELinuxOptions: bad}
		})), want)
	})

	t.Run("should restrict seLinuxTypes", func(t *testing.T) {
		const want = "SELinux type. Authorized: [container_t | container_init_t | container_kvm_t]"
		bad := &corev1.SELinuxOptions{Type: "unconfined"}
		denied(t, "the Pod's seLinuxOptions type", apply(t, testPod("security-selinux-pod", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SELinuxOptions: bad}
		})), want)
		denied(t, "a container's seLinuxOptions type", apply(t, testPod("security-selinux", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SELinuxOptions: bad}
		})), want)
	})

	t.Run("should drop all capabilities", func(t *testing.T) {
		pod := testPod("security-capabilities-drop", func(p *corev1.Pod) {
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"NET_ADMIN"}}}
		})
		if err := apply(t, pod); err != nil {
			t.Fatalf("a Pod dropping NET_ADMIN: %v; want it admitted, mutated to drop ALL", err)
		}
		if sc := pod.Spec.Containers[0].SecurityContext; sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("the stored Pod's container securityContext is %+v; want capabilities.drop [ALL]", sc)
		}
	})

	t.Run("should restrict capabilities.add for non-istio-init containers", func(t *testing.T) {
		denied(t, "capabilities.add NET_ADMIN", apply(t, testPod("security-capabilities-add", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}
		})), "Unauthorized container capabilities in securityContext.capabilities.add. Authorized: [NET_BIND_SERVICE]")
	})
}

// UDS Core's cases as case files (testdata/policies), run in process: what
// `uds-core test testdata/policies` runs without a cluster, and `make unit`
// with it.
func TestPolicyCases(t *testing.T) {
	vigiltest.Cases(t, newModule(), "testdata/policies")
}
