package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
)

// A binding that reads only metadata (vigil.Metadata) mutates and judges
// through the API server as one that reads the whole object: its handler
// gets a *metav1.PartialObjectMetadata, its patch edits metadata alone, and
// the stored object keeps everything else it was sent with.
func TestAdmissionOnMetadataAlone(t *testing.T) {
	apps, home := env.Namespace(t), env.Namespace(t)
	m := vigil.NewModule("metaonly", vigil.Options{Namespace: home})
	policies := m.Capability("policies", vigil.InNamespaces(apps))
	var seen []string
	vigil.When(policies, vigil.Metadata("", "v1", "Pod")).IsCreated().Named("stamp").
		Mutate(func(_ context.Context, r *vigil.Request[*metav1.PartialObjectMetadata]) error {
			seen = append(seen, fmt.Sprintf("%T %s", r.Object, r.Object.GroupVersionKind().Kind))
			r.SetLabel("vigil.dev/stamped", "true")
			return nil
		})
	vigil.When(policies, vigil.Metadata("", "v1", "Pod")).IsCreated().Named("need-team").
		Validate(func(_ context.Context, r *vigil.Request[*metav1.PartialObjectMetadata]) vigil.Verdict {
			if r.Object.Labels["team"] == "" {
				return admission.Deny("a Pod needs a team label")
			}
			return admission.Allow()
		})
	serveAdmission(t, m, "metaonly", []string{apps})

	c := newClient(t)
	pod := testkit.TestPod(apps, "stamped", map[string]string{"team": "shop"}, false)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "KEEP", Value: "me"}}
	if err := c.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Pod{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	if got.Labels["vigil.dev/stamped"] != "true" || got.Labels["team"] != "shop" {
		t.Errorf("the stored Pod's labels %v, want team=shop and the mutation's vigil.dev/stamped=true", got.Labels)
	}
	if len(got.Spec.Containers) != 1 || got.Spec.Containers[0].Image != "nginx:1.27" || len(got.Spec.Containers[0].Env) != 1 {
		t.Errorf("the stored Pod's containers %+v, want the one it was sent with, its image and env intact", got.Spec.Containers)
	}
	if len(seen) == 0 || seen[0] != "*v1.PartialObjectMetadata Pod" {
		t.Errorf("the mutation saw %q, want a *v1.PartialObjectMetadata of kind Pod", seen)
	}
	err := c.Create(t.Context(), testkit.TestPod(apps, "no-team", nil, false))
	if err == nil || !strings.Contains(err.Error(), "a Pod needs a team label") {
		t.Errorf("a Pod without a team label: %v, want the metadata validation's denial", err)
	}
}

// gadgetCRD serves kind Gadget under the plural "gadget", which is not the
// one Kubernetes guesses (gadgets).
var gadgetCRD = crdYAML("plural.vigil.dev", "Gadget", "gadget", "onegadget")

// A binding that reads only the metadata of a kind whose plural is not the
// guessed one (vigil.MetadataWithPlural) is registered and granted under
// that plural: plan gives it, the fail-closed webhooks the manifests ship
// and the watcher's RBAC name it, and the API server calls the validation
// for the kind's creates. With vigil.Metadata they would name "gadgets",
// which the API server never matches, and every Gadget would be admitted
// unjudged.
func TestMetadataWithPluralNamesTheResource(t *testing.T) {
	if err := env.InstallCRDYAML([]byte(gadgetCRD)); err != nil {
		t.Fatal(err)
	}
	apps, home := env.Namespace(t), env.Namespace(t)
	m := vigil.NewModule("gadgets", vigil.Options{Namespace: home})
	policies := m.Capability("policies", vigil.InNamespaces(apps))
	gadget := func() *metav1.PartialObjectMetadata {
		return vigil.MetadataWithPlural("plural.vigil.dev", "v1", "Gadget", "gadget")
	}
	vigil.When(policies, gadget()).IsCreated().Named("need-owner").
		Validate(func(_ context.Context, r *vigil.Request[*metav1.PartialObjectMetadata]) vigil.Verdict {
			if r.Object.Labels["owner"] == "" {
				return admission.Deny("a Gadget needs an owner label")
			}
			return admission.Allow()
		})
	vigil.When(m.Capability("strict", vigil.FailClosed()), gadget()).IsDeleted().Named("keep").
		Validate(func(context.Context, *vigil.Request[*metav1.PartialObjectMetadata]) vigil.Verdict {
			return admission.Allow()
		})
	vigil.Watch(policies, gadget()).Reconcile(func(context.Context, *metav1.PartialObjectMetadata) error { return nil })

	// What the manifests ship: RBAC and the fail-closed webhooks.
	var resources, hooked []string
	for _, o := range testkit.RenderManifests(t, m) {
		switch o.GetKind() {
		case "ClusterRole", "Role":
			var r rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				t.Fatal(err)
			}
			for _, rule := range r.Rules {
				if slices.Contains(rule.APIGroups, "plural.vigil.dev") {
					resources = append(resources, rule.Resources...)
				}
			}
		case "ValidatingWebhookConfiguration":
			var v admissionregistrationv1.ValidatingWebhookConfiguration
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &v); err != nil {
				t.Fatal(err)
			}
			for _, w := range v.Webhooks {
				for _, r := range w.Rules {
					hooked = append(hooked, r.Resources...)
				}
			}
		}
	}
	if len(resources) == 0 || slices.ContainsFunc(resources, func(r string) bool { return r != "gadget" }) {
		t.Errorf("the rendered RBAC's resources of plural.vigil.dev: %q, want only gadget", resources)
	}
	if !slices.Equal(hooked, []string{"gadget"}) {
		t.Errorf("the resources of the fail-closed webhooks the manifests ship: %q, want [gadget]", hooked)
	}
	if rules := testkit.BindingRules(t, m)["validate"]; len(rules) != 2 || rules[0].Resources[0] != "gadget" || rules[1].Resources[0] != "gadget" {
		t.Errorf("plan's resources of the validations: %+v, want gadget for both", rules)
	}

	// Registered as plan gives it, the API server calls the validation.
	serveAdmission(t, m, "gadgets", []string{apps})
	c := newClient(t)
	obj := func(name string, labels map[string]string) *unstructured.Unstructured {
		u := vigil.Kind("plural.vigil.dev", "v1", "Gadget")
		u.SetNamespace(apps)
		u.SetName(name)
		u.SetLabels(labels)
		return u
	}
	err := c.Create(t.Context(), obj("unowned", nil))
	if err == nil || !strings.Contains(err.Error(), "a Gadget needs an owner label") {
		t.Errorf("a Gadget without an owner label: %v, want the metadata validation's denial", err)
	}
	if err := c.Create(t.Context(), obj("owned", map[string]string{"owner": "shop"})); err != nil {
		t.Errorf("a Gadget with an owner label: %v, want it admitted", err)
	}
}
