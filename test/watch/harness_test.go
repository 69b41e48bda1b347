package watch

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
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

// waitReady polls url until it answers 200 (testkit.WaitReady).
func waitReady(t testing.TB, url string, exited <-chan struct{}) { testkit.WaitReady(t, url, exited) }

func scrape(t testing.TB, url string) string { return testkit.Scrape(t, url) }

func grepLines(s, substr string) string { return testkit.GrepLines(s, substr) }

// serveAdmission runs the module's admission role on a free loopback port
// and registers its paths in namespaces (testkit.ServeAdmission).
func serveAdmission(t *testing.T, m *vigil.Module, module string, namespaces []string, flags ...string) *testkit.Served {
	return testkit.ServeAdmission(t, env, m, module, namespaces, flags...)
}

// startChild re-runs the test binary as a process of one of the modules
// childModule knows, with the role and flags of args.
func startChild(t testing.TB, module string, env map[string]string, args ...string) *vigiltest.Process {
	return testkit.StartChild(t, module, env, args...)
}
