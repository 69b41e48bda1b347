// Command labeler is a small admitting module: it labels every ConfigMap and
// Pod created, and refuses those without an app label. Its mutations are Go,
// served by its webhook; its checks need nothing but the object, so they are
// Require's: CEL the API server evaluates itself, with no call to the module.
// It is also the module the admission benchmark loads.
//
//	labeler admission --cert-dir /etc/vigil/tls
//
// With LABELER_CHECKS=webhook it declares the same checks as Go validations,
// served by its validating webhook: how the benchmark measures that path, and
// what each way costs a create.
package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
)

func main() { vigil.Run(newModule()) }

func newModule() *vigil.Module {
	// Installed elsewhere when rendered with VIGIL_NAMESPACE.
	m := vigil.NewModule("labeler", vigil.Options{Namespace: "labeler-system"})
	labels := m.Capability("labels")

	vigil.When(labels, &corev1.ConfigMap{}).IsCreated().Named("label-configmaps").
		Mutate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) error {
			r.SetLabel("vigil.dev/labeled", "true")
			return nil
		})
	vigil.When(labels, &corev1.Pod{}).IsCreated().Named("label-pods").
		Mutate(func(_ context.Context, r *vigil.Request[*corev1.Pod]) error {
			r.SetLabel("vigil.dev/labeled", "true")
			return nil
		})

	// Where the app-label checks run: in the API server (require, CEL) or
	// in the module's webhook (webhook). A setting, so every container runs
	// with the value the manifests were rendered with.
	if vigil.SettingAs(m, "LABELER_CHECKS", "require", checksIn) == "webhook" {
		vigil.When(labels, &corev1.ConfigMap{}).IsCreated().Named("configmaps-need-app").
			Validate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
				if !r.HasLabel("app") {
					return admission.Deny("ConfigMap " + r.Name + " has no app label: add one, as in `app: my-service`")
				}
				return admission.Allow()
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
	const hasApp = `has(object.metadata.labels) && 'app' in object.metadata.labels`
	vigil.When(labels, &corev1.ConfigMap{}).IsCreated().Named("configmaps-need-app").
		Require(hasApp, "the ConfigMap has no app label: add one, as in `app: my-service`")
	vigil.When(labels, &corev1.Pod{}).IsCreated().Named("pods-need-app").
		Require(hasApp, "the Pod has no app label: add one, as in `app: my-service`")
	return m
}

// checksIn accepts where the checks run: require or webhook.
func checksIn(v string) (string, error) {
	if v != "require" && v != "webhook" {
		return v, fmt.Errorf("expected require or webhook")
	}
	return v, nil
}
