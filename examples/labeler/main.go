// Command labeler is a small admitting module: it labels every ConfigMap and
// Pod created in namespaces that opt in, and refuses those without an app
// label. It is also the module the admission benchmark loads.
//
//	labeler admission --cert-dir /etc/vigil/tls
package main

import (
	"context"
	"os"

	corev1 "k8s.io/api/core/v1"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
)

func main() { vigil.Run(newModule()) }

func newModule() *vigil.Module {
	ns := os.Getenv("LABELER_NAMESPACE")
	if ns == "" {
		ns = "labeler-system"
	}
	m := vigil.NewModule("labeler", vigil.Options{Namespace: ns})
	labels := m.Capability("labels")

	vigil.When(labels, &corev1.ConfigMap{}).IsCreated().Named("label-configmaps").
		Mutate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) error {
			r.SetLabel("vigil.dev/labeled", "true")
			return nil
		})
	vigil.When(labels, &corev1.ConfigMap{}).IsCreated().Named("configmaps-need-app").
		Validate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
			if !r.HasLabel("app") {
				return admission.Deny("ConfigMap " + r.Name + " has no app label: add one, as in `app: my-service`")
			}
			return admission.Allow()
		})
	vigil.When(labels, &corev1.Pod{}).IsCreated().Named("label-pods").
		Mutate(func(_ context.Context, r *vigil.Request[*corev1.Pod]) error {
			r.SetLabel("vigil.dev/labeled", "true")
			return nil
		})
	vigil.When(labels, &corev1.Pod{}).IsCreated().Named("pods-need-app").
		Validate(func(_ context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
			if !r.HasLabel("app") {
				return admission.Deny("Pod " + r.Name + " has no app label: add one, as in `app: my-service`")
			}
			return admission.Allow()
		})
	return m
}
