package shipping

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/testsupport/meshtest"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
)

// A second webhook server, as istiod's sidecar injector is installed: a
// Deployment, its Service, and a fail-closed mutating webhook on the Pods of
// namespaces labelled istio-injection=enabled, the module's among them.
// The module validates Pods everywhere, fail-closed once it enforces:
// `plan --cluster` reports the cycle (each side's pods are created only
// through the other's webhook), and none once the capability answers with
// Ignore in the injector's namespace (FailurePolicyIn).
func TestPlanClusterFindsDeadlocksWithOtherWebhooks(t *testing.T) {
	ctx := t.Context()
	home, mesh := env.Namespace(t), env.Namespace(t)
	cs := env.Clientset
	label := []byte(`{"metadata":{"labels":{"istio-injection":"enabled"}}}`)
	if _, err := cs.CoreV1().Namespaces().Patch(ctx, home, types.MergePatchType, label, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := map[string]string{"app": "istiod", "istio": "pilot"}
	if _, err := cs.AppsV1().Deployments(mesh).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "istiod"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "istiod"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pods},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "discovery", Image: "istio/pilot:1.24.0"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services(mesh).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "istiod"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "istiod"}, Ports: []corev1.ServicePort{{Name: "https-webhook", Port: 443}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	injector := "istio-sidecar-injector-" + mesh
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, meshtest.Injector(injector, mesh, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), injector, metav1.DeleteOptions{})
	})

	module := func(opts ...vigil.CapabilityOption) *vigil.Module {
		m := vigil.NewModule("meshed-"+home[len(home)-6:], vigil.Options{Namespace: home})
		policies := m.Capability("policies", opts...)
		vigil.When(policies, &corev1.Pod{}).IsCreated().Named("no-privileged").Validate(testkit.DenyPrivileged)
		return m
	}
	code, plan := testkit.RunCapture(t, module(), "plan", "--cluster", "--kubeconfig", kubeconfig(t))
	if code != 1 || !strings.Contains(plan, "deadlocks with the cluster's other webhooks") || !strings.Contains(plan, "1 found") ||
		!strings.Contains(plan, "MutatingWebhookConfiguration "+injector) || !strings.Contains(plan, "Service "+mesh+"/istiod") ||
		!strings.Contains(plan, `FailurePolicyIn(admission.Ignore, "`+mesh+`")`) {
		t.Fatalf("plan --cluster (exit %d) does not report the cycle with the injector:\n%s", code, plan)
	}
	t.Logf("plan --cluster:\n%s", plan[strings.Index(plan, "deadlocks with the cluster"):])
	code, plan = testkit.RunCapture(t, module(vigil.FailurePolicyIn(admission.Ignore, mesh)), "plan", "--cluster", "--kubeconfig", kubeconfig(t))
	if code != 0 || !strings.Contains(plan, "deadlocks with the cluster's other webhooks") || !strings.Contains(plan, "none found") {
		t.Fatalf("plan --cluster (exit %d) with Ignore in the injector's namespace: want no cycle:\n%s", code, plan)
	}
}
