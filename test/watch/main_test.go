package watch

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
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

// childModule is the module a process testkit.StartChild starts runs.
func childModule(role string, cfg *rest.Config) *vigil.Module {
	if role == "leader" {
		return leaderModule(os.Getenv("VIGIL_TEST_NAMESPACE"), cfg)
	}
	return nil
}
