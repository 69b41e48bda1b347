package shipping

import (
	"os"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	if role := os.Getenv(testkit.ChildRoleEnv); role != "" {
		// The test binary re-run as one of a test's module processes.
		os.Exit(testkit.RunChild(role, childModule))
	}
	if os.Getenv("VIGIL_HELPER") == "1" {
		// The test binary re-run as a module binary that needs no cluster
		// (TestHelperManifestsElsewhere): no control plane of its own.
		os.Exit(m.Run())
	}
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

// childModule is the module a process testkit.StartChild starts runs.
func childModule(role string, _ *rest.Config) *vigil.Module {
	if role == "least" {
		return leastModule(os.Getenv("VIGIL_TEST_NAMESPACE"), os.Getenv("VIGIL_TEST_APPS"))
	}
	return nil
}
