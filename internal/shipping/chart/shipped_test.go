package chart_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/vigiltest"
)

// What ships is what is tested: the chart, rendered by the Helm SDK with
// values a platform team would set, installed, and the module's admission
// role run from the rendered pod spec by vigiltest's runner — its args,
// env (extraEnv included), volumes and ServiceAccount token as a kubelet
// would give them. A wrong mount, env var, argument or RBAC rule in the
// chart fails here.
func TestChartPodsRunAsShipped(t *testing.T) {
	// A namespace of its own: the package's other tests uninstall
	// quota-system, which stays Terminating without a namespace controller.
	const ns = "quota-shipped"
	// The quota is a declared setting: rendered with 2, every container
	// gets 2.
	overlay := []string{"VIGIL_NAMESPACE=" + ns, "QUOTA_MAX_REPLICAS=2"}
	_, ch := writeChart(t, overlay...)
	rel, err := render(t, ch, map[string]any{
		"logLevel":  "debug",
		"extraEnv":  []any{map[string]any{"name": "QUOTA_NOTE", "value": "from extraEnv"}},
		"admission": map[string]any{"replicas": 1},
	})
	if err != nil {
		t.Fatalf("render the chart: %v", err)
	}
	stream := rel.Manifest
	for _, f := range ch.CRDObjects() {
		stream += "\n---\n" + string(f.File.Data)
	}
	m, err := vigiltest.DecodeManifests([]byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	// The release's hooks (the pre-delete Job and its RBAC) are not part
	// of what runs.
	var kept []*unstructured.Unstructured
	for _, o := range m.Objects {
		if _, hook := o.GetAnnotations()["helm.sh/hook"]; !hook {
			kept = append(kept, o)
		}
	}
	m.Objects = kept
	adm, err := m.Deployment("admission")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(adm.Spec.Template.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == "QUOTA_NOTE" && e.Value == "from extraEnv" }) {
		t.Errorf("extraEnv did not reach the admission container: %v", adm.Spec.Template.Spec.Containers[0].Env)
	}
	mod := env.InstallModule(t, vigiltest.ModuleOptions{Binary: quota(t), Manifests: m, Env: overlay})
	if mod.Name != module || mod.Namespace != ns {
		t.Fatalf("installed %s in %s, want %s in %s", mod.Name, mod.Namespace, module, ns)
	}
	mod.StartAdmission(60 * time.Second)
	if !strings.Contains(mod.Output("admission"), "level=DEBUG") {
		t.Errorf("logLevel debug did not reach the admission container:\n%s", mod.Output("admission"))
	}

	apps := env.Namespace(t)
	deploy := func(name string, replicas int32) *appsv1.Deployment {
		labels := map[string]string{"app": name}
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(replicas),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}},
				},
			},
		}
	}
	// The setting reached the module: its quota is 2, not the default 3.
	vigiltest.Denied(t, env.Client, deploy("three", 3), "the quota allows 2 at most")
	vigiltest.Admitted(t, env.Client, deploy("two", 2))
}
