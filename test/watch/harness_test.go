package watch

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
)

// kubeconfig is an admin's kubeconfig file of the control plane.
func kubeconfig(t *testing.T) string { return env.KubeConfigFile(t) }

// newClient is an admin's client of the control plane.
func newClient(t testing.TB) client.Client { return testkit.NewClient(t, env) }

// applyObjects applies objects with server-side apply as an admin, for real
// or as a dry run.
func applyObjects(t *testing.T, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	testkit.ApplyObjects(t, env, objs, dryRun)
}

// serveAdmission runs the module's admission role on a free loopback port
// and registers its paths in namespaces (testkit.ServeAdmission).
func serveAdmission(t *testing.T, m *vigil.Module, module string, namespaces []string, flags ...string) *testkit.Served {
	return testkit.ServeAdmission(t, env, m, module, namespaces, flags...)
}
