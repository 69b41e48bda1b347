package shipping

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/serving/certs"
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

// waitReady polls url until it answers 200 (testkit.WaitReady).
func waitReady(t testing.TB, url string, exited <-chan struct{}) { testkit.WaitReady(t, url, exited) }

// denyPrivileged denies a Pod with a privileged container.
func denyPrivileged(ctx context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
	return testkit.DenyPrivileged(ctx, r)
}

// servingDir, metricsURL, writeServing and runAdmission are testkit's: the
// in-process admission role of these tests.
func servingDir(t testing.TB) (*certs.CA, string) { return testkit.ServingDir(t) }

func runAdmission(t testing.TB, m *vigil.Module, addr string, flags ...string) (stop func()) {
	return testkit.RunAdmission(t, m, addr, flags...)
}

// startChild re-runs the test binary as a process of one of the modules
// childModule knows, with the role and flags of args.
func startChild(t testing.TB, module string, env map[string]string, args ...string) *vigiltest.Process {
	return testkit.StartChild(t, module, env, args...)
}
