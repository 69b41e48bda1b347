// Command kit is the module vigiltest's own tests install: the module of
// README's "Test your own module", with a gate, a mutation, a validation
// and a Reconcile.
package main

import (
	"cmp"
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
)

// AppNamespace is where the module admits and reconciles ConfigMaps:
// kit-apps, or what KIT_APPS names.
var AppNamespace = cmp.Or(os.Getenv("KIT_APPS"), "kit-apps")

func main() { vigil.Run(newModule()) }

func newModule() *vigil.Module {
	m := vigil.NewModule("kit", vigil.Options{Namespace: "kit-system"})
	vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("kit-config").InNamespace("kit-system").ToBeCreated(nil)

	cms := m.Capability("configmaps", vigil.InNamespaces(AppNamespace))
	vigil.When(cms, &corev1.ConfigMap{}).IsCreated().Named("label").
		Mutate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) error {
			r.SetLabel("checked", "true")
			return nil
		})
	vigil.When(cms, &corev1.ConfigMap{}).IsCreated().Named("need-app").
		Validate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
			if !r.HasLabel("app") {
				return admission.Deny(fmt.Sprintf("ConfigMap %s has no app label", r.Name))
			}
			return admission.Allow()
		})
	vigil.Watch(cms, &corev1.ConfigMap{}).InNamespace(AppNamespace).Reconcile(
		func(ctx context.Context, cm *corev1.ConfigMap) error {
			if cm.Annotations["reconciled"] == "true" {
				return nil
			}
			c := vigil.ClientFrom(ctx)
			patch := client.MergeFrom(cm.DeepCopy())
			if cm.Annotations == nil {
				cm.Annotations = map[string]string{}
			}
			cm.Annotations["reconciled"] = "true"
			return c.Patch(ctx, cm, patch)
		})
	m.RBAC("the Reconcile marks the ConfigMaps it has seen", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"patch"},
	}, AppNamespace)
	return m
}
