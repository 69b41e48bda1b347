package shipping

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
