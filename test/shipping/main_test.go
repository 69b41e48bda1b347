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

// TestMain: TestHelperManifestsElsewhere re-runs the binary with
// VIGIL_HELPER=1 as a module binary that needs no cluster.
func TestMain(m *testing.M) { os.Exit(testkit.Main(m, &env, childModule)) }

// childModule is the module of a process testkit.StartChild starts.
func childModule(role string, _ *rest.Config) *vigil.Module {
	if role == "least" {
		return leastModule(os.Getenv("VIGIL_TEST_NAMESPACE"), os.Getenv("VIGIL_TEST_APPS"))
	}
	return nil
}
