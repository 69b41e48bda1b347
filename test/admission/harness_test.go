package admission

import (
	"context"
	"net/http"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/serving/certs"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
)

// kubeconfig is an admin's kubeconfig file of the control plane.
func kubeconfig(t *testing.T) string { return env.KubeConfigFile(t) }

// newClient is an admin's client of the control plane.
func newClient(t testing.TB) client.Client { return testkit.NewClient(t, env) }

// eventually polls cond every 20 ms until it holds, or fails after d.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, d, what, cond)
}

// captureStdout runs fn and returns what it printed on stdout.
func captureStdout(t *testing.T, fn func()) string { return testkit.CaptureStdout(t, fn) }

// runCapture runs a module command in process: its exit code and stdout.
func runCapture(t *testing.T, m *vigil.Module, args ...string) (int, string) {
	return testkit.RunCapture(t, m, args...)
}

// decodeObjects decodes a stream of YAML or JSON objects.
func decodeObjects(t *testing.T, data []byte) []*unstructured.Unstructured {
	return testkit.DecodeObjects(t, data)
}

// renderManifests runs `<module> manifests` and decodes its objects.
func renderManifests(t *testing.T, m *vigil.Module, flags ...string) []*unstructured.Unstructured {
	return testkit.RenderManifests(t, m, flags...)
}

// applyObjects applies objects with server-side apply as an admin, for real
// or as a dry run.
func applyObjects(t *testing.T, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	testkit.ApplyObjects(t, env, objs, dryRun)
}

// renderChart renders m's chart as `helm template` does.
func renderChart(t *testing.T, m *vigil.Module, kube string, apis []string, vals map[string]any) (string, error) {
	return testkit.RenderChart(t, m, kube, apis, vals)
}

// runWatcher runs `<module> watcher` in the test process until the test
// ends (or stop is called) and waits until its /readyz passes.
func runWatcher(t testing.TB, m *vigil.Module, kubeconfig string, flags ...string) (stop func()) {
	return testkit.RunWatcher(t, m, kubeconfig, flags...)
}

func scrape(t testing.TB, url string) string { return testkit.Scrape(t, url) }

func grepLines(s, substr string) string { return testkit.GrepLines(s, substr) }

func httpGet(c *http.Client, url string) (int, string) { return testkit.HTTPGet(c, url) }

func testPod(ns, name string, labels map[string]string, privileged bool) *corev1.Pod {
	return testkit.TestPod(ns, name, labels, privileged)
}

// denyPrivileged denies a Pod with a privileged container.
func denyPrivileged(ctx context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
	return testkit.DenyPrivileged(ctx, r)
}

// serveAdmission runs the module's admission role on a free loopback port
// and registers its paths in namespaces (testkit.ServeAdmission).
func serveAdmission(t *testing.T, m *vigil.Module, module string, namespaces []string, flags ...string) *testkit.Served {
	return testkit.ServeAdmission(t, env, m, module, namespaces, flags...)
}

// bootstrapConfigs creates a module's empty webhook configurations, as its
// manifests do, and deletes them after the test.
func bootstrapConfigs(t testing.TB, name string) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	return testkit.BootstrapConfigs(t, env.Client, name)
}

// servingDir, metricsURL, writeServing and runAdmission are testkit's: the
// in-process admission role of these tests.
func servingDir(t testing.TB) (*certs.CA, string) { return testkit.ServingDir(t) }

func metricsURL(addr string) string { return testkit.MetricsURL(addr) }

func runAdmission(t testing.TB, m *vigil.Module, addr string, flags ...string) (stop func()) {
	return testkit.RunAdmission(t, m, addr, flags...)
}

// fewRights makes users with a tenant's rights on Namespaces and Pods.
func fewRights(t *testing.T, name string, users ...string) []client.Client {
	return testkit.FewRights(t, env, name, users...)
}

// tenant makes user a tenant who may create, get and delete resource (of
// group) in namespaces, and nothing else; it returns her client.
func tenant(t *testing.T, user, group, resource string, namespaces ...string) client.Client {
	t.Helper()
	return testkit.Tenant(t, env, user, group, resource, namespaces...)
}

// until retries try every 100ms until done says it is done, for at most
// within; fatal with what the last try saw.
func until(t *testing.T, within time.Duration, what string, try func(i int) error, done func(error) bool) {
	t.Helper()
	testkit.Until(t, within, what, try, done)
}
