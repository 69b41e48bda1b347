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

func TestMain(m *testing.M) { os.Exit(testkit.Main(m, &env, childModule)) }

// childModule is the module of a process testkit.StartChild starts.
func childModule(role string, cfg *rest.Config) *vigil.Module {
	if role == "leader" {
		return leaderModule(os.Getenv("VIGIL_TEST_NAMESPACE"), cfg)
	}
	return nil
}
