package admission

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
)

// templated is a module whose Pod validations also judge pod templates:
// privileged pods with a warning (the default), pods labelled forbidden
// with a refusal (TemplatesDeny).
func templated(home string) *vigil.Module {
	m := vigil.NewModule("templated", vigil.Options{Namespace: home})
	warned := m.Capability("warned")
	vigil.When(warned, &corev1.Pod{}).IsCreated().Named("no-privileged").PodTemplates().
		Validate(func(_ context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
			for _, c := range r.Object.Spec.Containers {
				if c.SecurityContext != nil && ptr.Deref(c.SecurityContext.Privileged, false) {
					return admission.Deny("container " + c.Name + " of Pod " + r.Name + " is privileged")
				}
			}
			return admission.Allow()
		})
	denied := m.Capability("denied")
	vigil.When(denied, &corev1.Pod{}).IsCreated().Named("not-forbidden").PodTemplates(vigil.TemplatesDeny).
		Validate(func(_ context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
			if r.HasLabel("forbidden") {
				return admission.Deny("Pod " + r.Name + " is labelled forbidden")
			}
			return admission.Allow()
		})
	return m
}

func podSpec(privileged bool) corev1.PodSpec {
	c := corev1.Container{Name: "app", Image: "nginx:1.27"}
	if privileged {
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}
	return corev1.PodSpec{Containers: []corev1.Container{c}, RestartPolicy: corev1.RestartPolicyOnFailure}
}

func deployment(ns, name string, labels map[string]string, privileged bool) *appsv1.Deployment {
	l := map[string]string{"app": name}
	for k, v := range labels {
		l[k] = v
	}
	spec := podSpec(privileged)
	spec.RestartPolicy = corev1.RestartPolicyAlways
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l}, Spec: spec},
		},
	}
}

// `kubectl apply` of a workload whose pods a Pod validation would deny is
// answered then, through the real API server: a warning by default, a
// refusal with TemplatesDeny; a scale, which leaves the template as it was,
// is not judged again; Pods themselves are judged as before.
func TestPodTemplatesAreJudgedAtApply(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	serveAdmission(t, templated(env.Namespace(t)), "templated", []string{ns})
	warned := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = warned
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}

	web := deployment(ns, "web", nil, true)
	if err := c.Create(ctx, web); err != nil {
		t.Fatalf("a Deployment with a privileged template: %v; want it admitted with a warning", err)
	}
	const want = "Deployment web: its pod template makes Pods that would be denied: container app of Pod web is privileged"
	if !strings.Contains(warned.String(), want) {
		t.Fatalf("warnings %q; want %q", warned.String(), want)
	}

	warned.all = nil
	web.Spec.Replicas = ptr.To[int32](3)
	if err := c.Update(ctx, web); err != nil {
		t.Fatal(err)
	}
	if got := warned.String(); got != "" {
		t.Errorf("a scale warned %q; want nothing: the template is as it was", got)
	}

	err = c.Create(ctx, deployment(ns, "bad", map[string]string{"forbidden": "yes"}, false))
	if err == nil || !strings.Contains(err.Error(), "Deployment bad: its pod template: Pod bad is labelled forbidden") {
		t.Fatalf("a Deployment with a forbidden template: %v; want it refused, naming the Deployment and the Pod's denial", err)
	}
	job := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"forbidden": "yes"}}, Spec: podSpec(false)},
		}}},
	}
	if err := c.Create(ctx, job); err == nil || !strings.Contains(err.Error(), "CronJob nightly: its pod template: Pod nightly is labelled forbidden") {
		t.Fatalf("a CronJob with a forbidden template: %v; want it refused", err)
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "direct"}, Spec: podSpec(true)}
	if err := c.Create(ctx, pod); err == nil || !strings.Contains(err.Error(), "container app of Pod direct is privileged") {
		t.Fatalf("a privileged Pod: %v; want it denied, as without PodTemplates", err)
	}
}

// PodTemplates on anything but a Pod validation is a definition mistake,
// named at its call site.
func TestPodTemplatesOnlyOnPodValidations(t *testing.T) {
	m := vigil.NewModule("templated", vigil.Options{})
	c := m.Capability("c")
	vigil.When(c, &corev1.ConfigMap{}).IsCreated().PodTemplates().
		Validate(func(context.Context, *vigil.Request[*corev1.ConfigMap]) vigil.Verdict { return admission.Allow() })
	vigil.When(c, &corev1.Pod{}).IsCreated().PodTemplates().
		Mutate(func(context.Context, *vigil.Request[*corev1.Pod]) error { return nil })
	vigil.When(c, &corev1.Pod{}).IsUpdated().PodTemplates().
		Validate(func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict { return admission.Allow() })
	err := m.Verify()
	for _, want := range []string{
		"templates_test.go:", "pod templates are judged by a binding on Pods (When(c, &corev1.Pod{})), not on ConfigMap",
		"pod templates are judged by a validation, not a mutate",
		"a workload's template becomes Pods by CREATE: add IsCreated",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Verify: %v; want a mistake containing %q", err, want)
		}
	}
}
