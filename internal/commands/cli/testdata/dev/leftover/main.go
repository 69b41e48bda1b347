// Command leftover is a module in all three roles, for the test that kills
// vigil dev: a gate phase that waits for the ConfigMap "go" in the module's
// namespace, a capability with an opt-out label (so it has a guard) that
// labels the ConfigMaps created in LEFTOVER_NAMESPACE and refuses those
// labelled deny=true, and a watcher of them. Its webhooks fail closed.
package main

import (
	"context"
	"os"

	corev1 "k8s.io/api/core/v1"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
)

func main() {
	ns := os.Getenv("LEFTOVER_NAMESPACE")
	m := vigil.NewModule("leftover", vigil.Options{Namespace: "leftover-system"})
	vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("go").InNamespace("leftover-system").ToBeCreated(nil)

	c := m.Capability("checks", vigil.OptOutLabel("leftover.vigil.dev/opt-out", "group:system:masters"))
	vigil.When(c, &corev1.ConfigMap{}).IsCreated().InNamespace(ns).Named("label-configmaps").
		Mutate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) error {
			r.SetLabel("leftover.vigil.dev/seen", "true")
			return nil
		})
	vigil.When(c, &corev1.ConfigMap{}).IsCreated().InNamespace(ns).Named("refuse-deny").
		Validate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
			if r.HasLabel("deny") {
				return admission.Deny("ConfigMap " + r.Name + " is labelled deny")
			}
			return admission.Allow()
		})
	vigil.Watch(c, &corev1.ConfigMap{}).InNamespace(ns).OnEvent(func(context.Context, *corev1.ConfigMap, vigil.WatchEvent) {})
	vigil.Run(m)
}
