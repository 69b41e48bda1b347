package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}}},
			},
		},
	}
}

// The quota holds on every path to a Deployment's replicas: create, update,
// and deployments/scale (kubectl scale), which carries a Scale.
func TestQuotaHoldsOnEveryPath(t *testing.T) {
	ctx := t.Context()
	bin := vigiltest.BuildModule(t, ".")
	plan, err := exec.Command(bin, "plan").CombinedOutput()
	if err != nil || !strings.Contains(string(plan), "deployment-scale validate deployments/scale UPDATE") {
		t.Fatalf("plan (%v) does not show the scale binding in kubectl's form:\n%s", err, plan)
	}

	// As it ships: its manifests applied, its admission role run from their
	// pod spec as its ServiceAccount (QUOTA_MAX_REPLICAS unset: 3).
	m := env.InstallModule(t, vigiltest.ModuleOptions{Binary: bin})
	m.StartAdmission(60 * time.Second)
	apps := env.Namespace(t)

	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "quota"}, vwc); err != nil {
		t.Fatal(err)
	}
	var resources []string
	for _, w := range vwc.Webhooks {
		if w.Name != "replicas.validate.quota.vigil.dev" {
			continue // the registration's canary
		}
		for _, r := range w.Rules {
			resources = append(resources, r.Resources...)
		}
	}
	// deployments/status for the status writes that change labels or
	// annotations, which the binding on Deployments' UPDATE also judges.
	if strings.Join(resources, ",") != "deployments,deployments/scale,deployments/status" {
		t.Fatalf("registered resources %v, want exactly deployments, deployments/scale and deployments/status", resources)
	}

	denied := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "the quota allows 3 at most") {
			t.Fatalf("%s: got %v, want it denied by the quota", what, err)
		}
	}
	web := deployment(apps, "web", 2)
	if err := env.Client.Create(ctx, web); err != nil {
		t.Fatalf("a Deployment within the quota: %v", err)
	}
	vigiltest.Denied(t, env.Client, deployment(apps, "big", 5), "the quota allows 3 at most")

	over := web.DeepCopy()
	over.Spec.Replicas = ptr.To[int32](4)
	denied("update to 4 replicas", env.Client.Update(ctx, over))

	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 9}}
	denied("kubectl scale to 9", env.Client.SubResource("scale").Update(ctx, web, client.WithSubResourceBody(scale)))

	scale = &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
	if err := env.Client.SubResource("scale").Update(ctx, web, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("scale to 3, within the quota: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(web), web); err != nil || *web.Spec.Replicas != 3 {
		t.Fatalf("after scaling to 3: replicas %v (%v)", web.Spec.Replicas, err)
	}
}
