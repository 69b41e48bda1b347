// Package meshed is the policy both versions of the deadlock test's module
// serve: a privileged Pod is denied everywhere the capability reaches.
package meshed

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
)

// Namespace is the module's; the injector's webhook covers it.
const Namespace = "meshed-system"

// Mesh is the injector's namespace.
const Mesh = "istio-system"

// Policies binds the policy to the capability.
func Policies(c *vigil.Capability) {
	vigil.When(c, &corev1.Pod{}).IsCreated().Named("no-privileged").Validate(func(_ context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
		for _, c := range r.Object.Spec.Containers {
			if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
				return admission.Deny("privileged pods are not allowed")
			}
		}
		return admission.Allow()
	})
}
