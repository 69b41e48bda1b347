// Command listerbench is the module BenchmarkAdmissionLister in
// test/labeler loads: two validations of ConfigMaps, served each on its
// capability's own path, one reading nothing and one reading a Lister of
// every ConfigMap in the cluster — the cost of a lister read, side by side
// in one process.
//
//	listerbench admission --cert-dir /etc/vigil/tls
package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
)

func main() { vigil.Run(newModule()) }

func newModule() *vigil.Module {
	m := vigil.NewModule("listerbench", vigil.Options{Namespace: "listerbench-system"})
	// The namespace whose ConfigMaps' names are reserved: a ConfigMap of
	// the same name elsewhere is refused by the "cached" validation.
	reserved := vigil.Setting(m, "LISTERBENCH_RESERVED_NAMESPACE", "")
	configMaps := vigil.NewLister(m, &corev1.ConfigMap{})

	vigil.When(m.Capability("plain"), &corev1.ConfigMap{}).IsCreated().Named("needs-app").
		Validate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
			if !r.HasLabel("app") {
				return admission.Deny("ConfigMap " + r.Name + " has no app label: add one")
			}
			return admission.Allow()
		})
	vigil.When(m.Capability("cached"), &corev1.ConfigMap{}).IsCreated().Named("name-not-reserved").
		Validate(func(ctx context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
			if !r.HasLabel("app") {
				return admission.Deny("ConfigMap " + r.Name + " has no app label: add one")
			}
			_, err := configMaps.Get(ctx, reserved, r.Name)
			switch {
			case err == nil:
				return admission.Deny("ConfigMap name " + r.Name + " is reserved (namespace " + reserved + "): choose another")
			case apierrors.IsNotFound(err):
				return admission.Allow()
			default:
				return admission.Deny("check reserved names: " + err.Error())
			}
		})
	return m
}
